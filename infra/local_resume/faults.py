"""Errors queued for the next calls of an operation, so that a client's retries can be tested:
`POST /_countersign/faults` {"operation": "SendTaskSuccess", "error": "ThrottlingException",
"count": 2} makes the next two SendTaskSuccess calls answer that error (before anything else is
checked, as a throttled or failing service answers). With `"target"` (a task token or a
callback id) only the calls for it take the fault: tests running at once against one local AWS
do not take each other's. Only the errors each service documents for these operations are known.
"""

from __future__ import annotations

import threading
from collections import deque

# operation -> the errors it may be made to answer: (status, message)
KNOWN: dict[str, dict[str, tuple[int, str]]] = {}
for _operation in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"):
    KNOWN[_operation] = {
        "ThrottlingException": (400, "Rate exceeded"),
        "ServiceUnavailable": (503, "Service Unavailable"),
        "InternalFailure": (500, "An internal error occurred"),
    }
for _operation in ("SendDurableExecutionCallbackSuccess", "SendDurableExecutionCallbackFailure",
                   "SendDurableExecutionCallbackHeartbeat"):
    KNOWN[_operation] = {
        "TooManyRequestsException": (429, "Rate exceeded"),
        "ServiceException": (500, "The Lambda service encountered an internal error."),
    }

# SES v2 SendEmail (API_SendEmail.html, "Errors"): throttled, refused, failed.
KNOWN["SendEmail"] = {
    "TooManyRequestsException": (429, "Maximum sending rate exceeded."),
    "MessageRejected": (400, "Email address is not verified. The following identities failed the check in region US-EAST-1"),
    "InternalFailure": (500, "An internal error occurred"),
}

_lock = threading.Lock()
# operation -> the queued errors, each with the token or callback id it is for (None: any)
_queued: dict[str, deque[tuple[str, str | None]]] = {}


def queue(operation: str, error: str, count: int, target: str | None = None) -> None:
    if operation not in KNOWN:
        raise ValueError(f"operation {operation!r}: one of {sorted(KNOWN)}")
    if error not in KNOWN[operation]:
        raise ValueError(f"error {error!r} for {operation}: one of {sorted(KNOWN[operation])}")
    if not 1 <= count <= 1000:
        raise ValueError("count: 1 to 1000")
    with _lock:
        _queued.setdefault(operation, deque()).extend([(error, target)] * count)


def take(operation: str, target: str | None = None) -> tuple[str, int, str] | None:
    """The next error queued for `operation` and a call for `target`: (code, HTTP status,
    message), or None."""
    with _lock:
        pending = _queued.get(operation)
        if not pending:
            return None
        found = next((i for i, (_, t) in enumerate(pending) if t is None or t == target), None)
        if found is None:
            return None
        code, _ = pending[found]
        del pending[found]
    status, message = KNOWN[operation][code]
    return code, status, message


def clear() -> None:
    with _lock:
        _queued.clear()

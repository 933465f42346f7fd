"""SES v2 SendEmail as the local AWS needs it (patch 14 of moto_patches.py).

moto 5.2.5's SendEmail (API v2) refuses a sender that is not a verified identity, as SES does
(`MessageRejected`), but keeps what it sent only in its own process, and of a simple message
only one body (the HTML part, or else the text). Here each email SES took is also kept whole —
`{"from", "to", "subject", "text", "html", "at"}`, oldest first — for the control API's
`GET /_countersign/emails` (`local_resume/control.py`), where `make run` and the tests read what
an approver was sent.

Faults injected through the control API (`local_resume/faults.py`) are answered first, before
anything is sent, as SES answers a throttled or failed request: `TooManyRequestsException`
(429), `MessageRejected` (400, an unverified recipient in the sandbox), `InternalFailure`
(500). With `"target"` only the emails to that address take them.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

from moto.core.exceptions import JsonRESTError

from local_resume import faults

_lock = threading.Lock()
SENT: list[dict[str, Any]] = []


def sent(to: str | None = None) -> list[dict[str, Any]]:
    """The emails SES took, oldest first; only those to `to` when given."""
    with _lock:
        return [dict(email) for email in SENT if to is None or to in email["to"]]


def _error(code: str, message: str, status: int) -> JsonRESTError:
    error = JsonRESTError(code, message)
    error.code = status
    return error


def checked(original: Callable[[Any], str]) -> Callable[[Any], str]:
    """`SESV2Response.send_email`, answering injected faults first and keeping each email whole."""

    def send_email(self: Any) -> str:
        params = json.loads(self.body or "{}")
        destination = params.get("Destination") or {}
        to = list(destination.get("ToAddresses") or [])
        fault = faults.take("SendEmail", to[0] if to else None)
        if fault is not None:
            code, status, message = fault
            raise _error(code, message, status)
        answer = original(self)
        simple = (params.get("Content") or {}).get("Simple") or {}
        body = simple.get("Body") or {}
        with _lock:
            SENT.append({
                "from": params.get("FromEmailAddress"),
                "to": to,
                "subject": (simple.get("Subject") or {}).get("Data"),
                "text": (body.get("Text") or {}).get("Data"),
                "html": (body.get("Html") or {}).get("Data"),
                "reply_to": list(params.get("ReplyToAddresses") or []),
                "configuration_set": params.get("ConfigurationSetName"),
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            })
        return answer

    return send_email

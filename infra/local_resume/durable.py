"""Lambda durable functions' callbacks, as AWS answers them; moto has no durable functions.

A durable function pauses on a callback (the durable execution SDK's `createCallback` /
`waitForCallback`) and an outside system answers it by its id with
SendDurableExecutionCallbackSuccess, SendDurableExecutionCallbackFailure or
SendDurableExecutionCallbackHeartbeat (Lambda API reference; botocore's lambda model,
2015-03-31). Here a test creates the callback itself through the control API (`control.py`),
as a durable execution would, and the calls are answered with AWS's rules:

- `CallbackId` is 1 to 1,024 characters of the pattern `[A-Za-z0-9+/]+={0,2}`: otherwise
  `InvalidParameterValueException`. So is an id of that pattern that this service cannot have
  issued (it names no durable execution).
- An id that names a durable execution but no callback of it (made up, or issued by another
  process) is `ResourceNotFoundException`, one of the operations' documented errors.
- A callback is answered once: once it succeeded or failed, another answer (or a heartbeat) is
  `CallbackTimeoutException` ("The callback ID token has either expired or the callback
  associated with the token has already been closed"). Past its timeout, or its heartbeat
  timeout since the last heartbeat, it is closed as timed out, and so answered the same way.
- Success's body is the raw result, at most 262,144 bytes (the API reference: "Maximum size is
  256 KB"); failure's body is an ErrorObject `{ErrorMessage, ErrorType, ErrorData, StackTrace}`
  (strings, and a list of strings), or none. Otherwise `InvalidParameterValueException`.

Ids look like AWS's: base64. Each one carries the durable execution's ARN
(`arn:aws:lambda:REGION:ACCOUNT:function:NAME:QUALIFIER/durable-execution/EXECUTION_NAME/
EXECUTION_ID`), which is what IAM evaluates the calls against (local_iam/requests.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

ID_MAX = 1024
ID_PATTERN = re.compile(r"[A-Za-z0-9+/]+={0,2}")
RESULT_MAX_BYTES = 262144
_MAGIC = b"\x02countersign-local-callback\x00"
_FUNCTION_ARN = re.compile(
    r"arn:aws:lambda:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):function:(?P<name>[A-Za-z0-9_-]{1,64})"
    r"(?::(?P<qualifier>\$LATEST|\d+))?"
)
_EXECUTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class CallbackError(Exception):
    """An error of AWS's: its code, HTTP status and message."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


def _invalid(message: str) -> CallbackError:
    return CallbackError("InvalidParameterValueException", 400, message)


def check_id(callback_id: str) -> None:
    if not 1 <= len(callback_id) <= ID_MAX:
        raise _invalid(f"1 validation error detected: Value at 'callbackId' failed to satisfy constraint: "
                       f"Member must have length between 1 and {ID_MAX}")
    if not ID_PATTERN.fullmatch(callback_id):
        raise _invalid("1 validation error detected: Value at 'callbackId' failed to satisfy constraint: "
                       "Member must satisfy regular expression pattern: [A-Za-z0-9+/]+={0,2}")


def execution_of(callback_id: str) -> str | None:
    """The durable execution ARN a callback id names, or None for an id this service cannot
    have issued."""
    try:
        raw = base64.b64decode(callback_id, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw.startswith(_MAGIC):
        return None
    arn, _, operation = raw[len(_MAGIC):].partition(b"\x00")
    try:
        text = arn.decode()
    except UnicodeDecodeError:
        return None
    return text if text.startswith("arn:aws:lambda:") and operation else None


@dataclass
class Callback:
    callback_id: str
    durable_execution_arn: str
    function_arn: str
    timeout_at: float | None
    heartbeat_seconds: float | None
    heartbeat_at: float | None
    status: str = "pending"  # pending, succeeded, failed, timed_out
    result: bytes | None = None
    error: dict[str, Any] | None = None
    calls: dict[str, int] = field(default_factory=lambda: {"succeed": 0, "fail": 0, "heartbeat": 0})
    answers_accepted: int = 0
    heartbeats_accepted: int = 0

    def describe(self) -> dict[str, Any]:
        text = None
        if self.result is not None:
            try:
                text = self.result.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        return {
            "callback_id": self.callback_id,
            "durable_execution_arn": self.durable_execution_arn,
            "function_arn": self.function_arn,
            "status": self.status,
            "result": text,
            "result_base64": None if self.result is None else base64.b64encode(self.result).decode(),
            "error": self.error,
            "calls": dict(self.calls),
            "answers_received": self.calls["succeed"] + self.calls["fail"],
            "answers_accepted": self.answers_accepted,
            "heartbeats_accepted": self.heartbeats_accepted,
        }


class Callbacks:
    """Every callback created in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_id: dict[str, Callback] = {}

    def create(self, spec: dict[str, Any]) -> Callback:
        match = _FUNCTION_ARN.fullmatch(str(spec.get("function_arn") or ""))
        if match is None:
            raise ValueError("function_arn: arn:aws:lambda:REGION:ACCOUNT:function:NAME[:$LATEST|:VERSION]")
        name = str(spec.get("execution_name") or f"execution-{secrets.token_hex(6)}")
        if not _EXECUTION_NAME.fullmatch(name):
            raise ValueError("execution_name: 1 to 64 of [A-Za-z0-9_-]")
        timeout = _seconds(spec, "timeout_seconds")
        heartbeat = _seconds(spec, "heartbeat_timeout_seconds")
        function = f"arn:aws:lambda:{match['region']}:{match['account']}:function:{match['name']}"
        qualifier = match["qualifier"] or "$LATEST"
        execution = f"{function}:{qualifier}/durable-execution/{name}/{uuid.uuid4()}"
        raw = _MAGIC + execution.encode() + b"\x00" + secrets.token_bytes(24)
        callback_id = base64.b64encode(raw).decode()
        now = time.monotonic()
        callback = Callback(
            callback_id, execution, function,
            None if timeout is None else now + timeout,
            heartbeat,
            None if heartbeat is None else now + heartbeat,
        )
        with self.lock:
            self.by_id[callback_id] = callback
        return callback

    def get(self, callback_id: str) -> Callback | None:
        with self.lock:
            callback = self.by_id.get(callback_id)
            if callback is not None:
                self._expire(callback, time.monotonic())
            return callback

    @staticmethod
    def _expire(callback: Callback, now: float) -> None:
        if callback.status != "pending":
            return
        if (callback.timeout_at is not None and now >= callback.timeout_at) or (
                callback.heartbeat_at is not None and now >= callback.heartbeat_at):
            callback.status = "timed_out"

    def answer(self, callback_id: str, kind: str, body: bytes) -> None:
        """Applies one call (`kind`: succeed, fail or heartbeat) or raises AWS's error for it."""
        check_id(callback_id)
        if execution_of(callback_id) is None:
            raise _invalid("The callback ID is not valid.")
        with self.lock:
            callback = self.by_id.get(callback_id)
            if callback is None:
                raise CallbackError("ResourceNotFoundException", 404, "The callback does not exist.")
            callback.calls[kind] += 1
            result, error = None, None
            if kind == "succeed":
                if len(body) > RESULT_MAX_BYTES:
                    raise _invalid(f"Result: at most {RESULT_MAX_BYTES} bytes, got {len(body)}")
                result = body
            elif kind == "fail":
                error = _error_object(body)
            self._expire(callback, time.monotonic())
            if callback.status != "pending":
                raise CallbackError(
                    "CallbackTimeoutException", 400,
                    "The callback ID token has either expired or the callback associated with the token has "
                    "already been closed.")
            if kind == "heartbeat":
                callback.heartbeats_accepted += 1
                if callback.heartbeat_seconds is not None:
                    callback.heartbeat_at = time.monotonic() + callback.heartbeat_seconds
                return
            callback.answers_accepted += 1
            if kind == "succeed":
                callback.status, callback.result = "succeeded", result
            else:
                callback.status, callback.error = "failed", error


def _seconds(spec: dict[str, Any], key: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    seconds = float(value)
    if seconds <= 0:
        raise ValueError(f"{key}: more than 0")
    return seconds


def _error_object(body: bytes) -> dict[str, Any] | None:
    if not body.strip():
        return None
    try:
        error = json.loads(body)
    except ValueError:
        raise _invalid("Error: not a JSON ErrorObject")
    if not isinstance(error, dict):
        raise _invalid("Error: not a JSON ErrorObject")
    for key, value in error.items():
        if key == "StackTrace":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _invalid("Error.StackTrace: a list of strings")
        elif key in ("ErrorMessage", "ErrorType", "ErrorData"):
            if not isinstance(value, str):
                raise _invalid(f"Error.{key}: a string")
        else:
            raise _invalid(f"Error: unknown member {key}")
    return error


CALLBACKS = Callbacks()

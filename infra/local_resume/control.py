"""The WSGI layer, in front of moto, that serves Lambda's durable-execution callbacks (which moto
does not have) and the tests' control API. Everything else goes on to moto.

On the wire, as the AWS SDKs send them (restJson1; botocore's lambda model, 2015-03-31):

    POST /2025-12-01/durable-execution-callbacks/{CallbackId}/succeed    body: the result's bytes
    POST /2025-12-01/durable-execution-callbacks/{CallbackId}/fail       body: an ErrorObject (JSON)
    POST /2025-12-01/durable-execution-callbacks/{CallbackId}/heartbeat
    -> 200, empty; or an error: its HTTP status, `x-amzn-ErrorType: <code>` and a JSON body
       {"Type": "User"|"Service", "message": ...}, as Lambda answers (the SDKs read the header).

The CallbackId is percent-encoded in the path (`/`, `+` and `=` are base64's): it is read from
the raw request URI, since WSGI's PATH_INFO is already decoded.

The control API (no credentials; the tests' and `make run`'s own, like the IAM gate's stack
registration):

    POST /_countersign/durable/callbacks
         {"function_arn", "execution_name"?, "timeout_seconds"?, "heartbeat_timeout_seconds"?}
         -> {"callback_id", "durable_execution_arn"}   (a durable execution paused on a callback)
    GET  /_countersign/durable/callbacks/{CallbackId, percent-encoded}
         -> {"status": pending|succeeded|failed|timed_out, "result", "result_base64", "error",
             "calls": {"succeed", "fail", "heartbeat"}, "answers_received", "answers_accepted",
             "heartbeats_accepted", "durable_execution_arn", "function_arn", "callback_id"}
    POST /_countersign/faults {"operation", "error", "count"?, "target"?}  -> {"queued": count}
    DELETE /_countersign/faults                                -> {"cleared": true}
    GET  /_countersign/emails[?to=ADDRESS]  -> [{"from", "to", "subject", "text", "html", "at", ...}]
         (what SES v2 SendEmail took, oldest first: moto_fixes/ses.py)
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any, Callable, Iterable
from urllib.parse import quote, unquote

from . import faults
from .durable import CALLBACKS, CallbackError

CALLBACK_PATH = re.compile(r"^/2025-12-01/durable-execution-callbacks/(?P<id>[^/]+)/(?P<kind>succeed|fail|heartbeat)$")
CONTROL_CALLBACKS = "/_countersign/durable/callbacks"
CONTROL_FAULTS = "/_countersign/faults"
CONTROL_EMAILS = "/_countersign/emails"
OPERATIONS = {
    "succeed": "SendDurableExecutionCallbackSuccess",
    "fail": "SendDurableExecutionCallbackFailure",
    "heartbeat": "SendDurableExecutionCallbackHeartbeat",
}


def raw_path(environ: dict[str, Any]) -> str:
    """The request's path as sent (percent-encoded), without its query."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or quote(environ.get("PATH_INFO", ""))
    if "://" in raw:  # an absolute URI
        raw = "/" + raw.split("://", 1)[1].partition("/")[2]
    return raw.split("?", 1)[0]


def callback_call(environ: dict[str, Any]) -> tuple[str, str] | None:
    """(CallbackId, succeed|fail|heartbeat) of a callback call, or None."""
    if environ.get("REQUEST_METHOD") != "POST":
        return None
    match = CALLBACK_PATH.match(raw_path(environ))
    if match is None:
        return None
    return unquote(match["id"]), match["kind"]


def _json(start_response: Callable[..., Any], status: int, payload: Any, headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    body = b"" if payload is None else json.dumps(payload).encode()
    reasons = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 429: "Too Many Requests",
               500: "Internal Server Error"}
    start_response(f"{status} {reasons.get(status, 'Error')}", [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        ("x-amzn-RequestId", secrets.token_hex(16)),
        *(headers or []),
    ])
    return [body]


def lambda_error(start_response: Callable[..., Any], code: str, status: int, message: str) -> list[bytes]:
    headers = [("x-amzn-ErrorType", code)]
    body: dict[str, Any] = {"Type": "Service" if status >= 500 else "User", "message": message, "Message": message}
    if code == "TooManyRequestsException":
        headers.append(("Retry-After", "1"))
        body["Reason"] = "CallerRateLimitExceeded"
    return _json(start_response, status, body, headers)


class Control:
    """WSGI middleware: durable callbacks and the control API here, the rest to `app`."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        call = callback_call(environ)
        if call is not None:
            return self._callback(environ, start_response, *call)
        path = raw_path(environ)
        if path == CONTROL_EMAILS:
            from urllib.parse import parse_qs

            from moto_fixes import ses

            if environ.get("REQUEST_METHOD") != "GET":
                return _json(start_response, 405, {"error": "GET"})
            to = parse_qs(environ.get("QUERY_STRING", "")).get("to", [None])[0]
            return _json(start_response, 200, ses.sent(to))
        if path == CONTROL_FAULTS or path.startswith(CONTROL_CALLBACKS):
            try:
                return self._control(environ, start_response, path)
            except (ValueError, TypeError, KeyError) as e:
                return _json(start_response, 400, {"error": str(e)})
        return self.app(environ, start_response)

    @staticmethod
    def _body(environ: dict[str, Any]) -> bytes:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        return environ["wsgi.input"].read(length) if length else b""

    def _callback(self, environ: dict[str, Any], start_response: Callable[..., Any], callback_id: str, kind: str) -> list[bytes]:
        body = self._body(environ)
        fault = faults.take(OPERATIONS[kind], callback_id)
        if fault is not None:
            return lambda_error(start_response, *fault)
        try:
            CALLBACKS.answer(callback_id, kind, body)
        except CallbackError as e:
            return lambda_error(start_response, e.code, e.status, e.message)
        return _json(start_response, 200, None)

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any], path: str) -> list[bytes]:
        method = environ.get("REQUEST_METHOD")
        if path == CONTROL_FAULTS:
            if method == "DELETE":
                faults.clear()
                return _json(start_response, 200, {"cleared": True})
            if method != "POST":
                return _json(start_response, 405, {"error": "POST or DELETE"})
            spec = json.loads(self._body(environ) or b"{}")
            count = int(spec.get("count", 1))
            target = spec.get("target")
            faults.queue(str(spec["operation"]), str(spec["error"]), count,
                         None if target is None else str(target))
            return _json(start_response, 200, {"queued": count})
        if path == CONTROL_CALLBACKS:
            if method != "POST":
                return _json(start_response, 405, {"error": "POST"})
            callback = CALLBACKS.create(json.loads(self._body(environ) or b"{}"))
            return _json(start_response, 200, {"callback_id": callback.callback_id,
                                               "durable_execution_arn": callback.durable_execution_arn})
        if method != "GET" or not path.startswith(CONTROL_CALLBACKS + "/"):
            return _json(start_response, 405, {"error": "GET /_countersign/durable/callbacks/{id}"})
        found = CALLBACKS.get(unquote(path[len(CONTROL_CALLBACKS) + 1:]))
        if found is None:
            return _json(start_response, 404, {"error": "no such callback"})
        return _json(start_response, 200, found.describe())

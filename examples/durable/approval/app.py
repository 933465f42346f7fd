"""A Lambda durable function that asks Countersign for an approval and waits for it
(examples/durable/README.md).

`context.wait_for_callback` creates a callback, runs `ask` below as a checkpointed step with the
callback's id, then suspends the execution: nothing runs and nothing is billed while people
decide. When the approval ends, Countersign's executor answers the callback once:
SendDurableExecutionCallbackSuccess with the decision document (approved), or
SendDurableExecutionCallbackFailure with ErrorType Countersign.Rejected, Countersign.Expired or
Countersign.Cancelled, ErrorMessage "Countersign approval <id> ended <rejected|expired|
cancelled>" and the decision document as ErrorData. Lambda then runs the handler again, and
wait_for_callback returns the result or raises.

Written against aws-durable-execution-sdk-python 1.7.0 (requirements.txt). The HTTP call is the
standard library's urllib; the secret is read with the boto3 that the Lambda Python runtime
includes. The API key is never logged and never returned from a step (a step's result is
checkpointed: it is in the execution's history); the callback id is a credential, never logged.
"""

import hashlib
import json
import os
import re
import urllib.error
import urllib.request

import boto3
from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration, WaitForCallbackConfig
from aws_durable_execution_sdk_python.exceptions import CallableRuntimeError
from aws_durable_execution_sdk_python.retries import RetryDecision

API_URL = os.environ["COUNTERSIGN_API_URL"].rstrip("/")
SECRET_ARN = os.environ["COUNTERSIGN_API_KEY_SECRET_ARN"]
# How long past the approval's expiry the callback waits for Countersign's answer: the sweeper
# runs every minute, then the queue and the call.
MARGIN_SECONDS = 300
# Countersign's ErrorMessage on a failure answer.
ENDED = re.compile(r"Countersign approval (\S+) ended (rejected|expired|cancelled)")

_secrets = boto3.client("secretsmanager")
_api_key = None  # read once per container, kept in memory only


class CountersignRefused(Exception):
    """Countersign refused the create (4xx): retrying the same request cannot help."""


class CountersignUnavailable(Exception):
    """Countersign did not answer, or answered 5xx / 429: the step tries again."""


def retry_unavailable(error: Exception, attempt: int) -> RetryDecision:
    """The ask step's retries: only when Countersign may answer later, 5 tries in all."""
    if isinstance(error, CountersignUnavailable) and attempt < 5:
        return RetryDecision.retry(Duration.from_seconds(2**attempt))
    return RetryDecision.no_retry()


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    """`event`: {"request": <a POST /approvals body without resume>}."""
    request = dict(event["request"])
    expires_in = int(request.setdefault("expires_in_seconds", 86_400))
    execution = context.execution_context.durable_execution_arn

    def ask(callback_id: str, _wait_context) -> None:
        # A step: it may run more than once (a retry, a crash before its checkpoint). The key
        # and the callback id are the same every time, so a second create replays the first.
        body = dict(request, resume={"type": "lambda_durable", "callback_id": callback_id})
        approval = create(body, idempotency_key(execution, "approval"))
        print(json.dumps({"msg": "approval requested", "approval_id": approval["id"]}))

    try:
        document = context.wait_for_callback(
            ask,
            name="approval",
            config=WaitForCallbackConfig(
                timeout=Duration.from_seconds(expires_in + MARGIN_SECONDS),
                retry_strategy=retry_unavailable,
            ),
        )
    except CallableRuntimeError as failure:
        # SDK 1.7.0 raises this for a failed callback, a timed-out one and a failed ask step
        # alike, with the ErrorMessage only (not ErrorType or ErrorData).
        ended = ENDED.fullmatch(failure.message or "")
        if ended:
            return {"outcome": ended[2], "approval_id": ended[1]}
        # The callback's own timeout passed first (Countersign's later answer is then refused,
        # and the approval's resume ends failed), or the ask failed: CountersignRefused
        # (resume_not_enabled, invalid_request, ...) or CountersignUnavailable.
        return {"outcome": "not_approved", "error": failure.message}

    decision = json.loads(document)
    # {approval_id, tenant, idempotency_key, requested_by, status: "approved", decided_at, votes}.
    # Countersign binds a callback id to one approval, and the document names the request it
    # answers: act only on an answer to this execution's own create.
    if decision.get("idempotency_key") != idempotency_key(execution, "approval"):
        return {"outcome": "not_our_approval", "approval_id": decision.get("approval_id")}
    # Put the approved work here, in steps of its own.
    return {"outcome": "approved", "decision": decision}


def idempotency_key(*parts: str) -> str:
    """Countersign takes 1-255 printable ASCII characters; a durable execution's ARN with the
    name may be longer, and then the key is their SHA-256."""
    key = "#".join(parts)
    if len(key) <= 255 and key.isascii() and key.isprintable():
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def api_key() -> str:
    global _api_key
    if _api_key is None:
        _api_key = _secrets.get_secret_value(SecretId=SECRET_ARN)["SecretString"].strip()
    return _api_key


def create(body: dict, key: str) -> dict:
    """POST /approvals: the approval, or CountersignRefused / CountersignUnavailable."""
    request = urllib.request.Request(
        f"{API_URL}/approvals", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {api_key()}",
                 "Content-Type": "application/json", "Idempotency-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        problem = _problem(error)
        if error.code < 500 and error.code != 429:
            # Its code and detail name a field, never the callback id (Countersign never
            # echoes it).
            raise CountersignRefused(f"{error.code} {problem}") from None
        raise CountersignUnavailable(f"{error.code} {problem}") from None
    except (urllib.error.URLError, TimeoutError) as error:
        raise CountersignUnavailable(f"no answer: {getattr(error, 'reason', error)}") from None


def _problem(error: urllib.error.HTTPError) -> str:
    try:
        problem = json.load(error)
        return f"{problem.get('code')}: {problem.get('detail')}"
    except (ValueError, OSError):
        return error.reason

"""The "ask" step of examples/stepfunctions: asks Countersign for an approval that resumes the
state machine's paused task when it ends.

Step Functions invokes this function from a `lambda:invoke.waitForTaskToken` task, with the
task token in its input (that is how a callback task hands its token out: the token is in the
task's scheduled event of the execution history). The function creates the approval with
`"resume": {"type": "stepfunctions", "task_token": ...}` and returns; the task then waits until
Countersign's executor calls SendTaskSuccess (approved: the decision document is the task's
output) or SendTaskFailure (Countersign.Rejected, Countersign.Expired, Countersign.Cancelled).

Nothing to package: the standard library (urllib for the HTTP call) and the boto3 that the
Lambda Python runtime includes (for the one Secrets Manager read). The API key and the task
token are never logged, never returned, and never put in the state's data.
"""

import hashlib
import json
import os
import time
import urllib.error
import urllib.request

import boto3

API_URL = os.environ["COUNTERSIGN_API_URL"].rstrip("/")
SECRET_ARN = os.environ["COUNTERSIGN_API_KEY_SECRET_ARN"]

_secrets = boto3.client("secretsmanager")
_api_key = None  # read once per container, kept in memory only


class CountersignRefused(Exception):
    """Countersign refused the create (4xx): retrying the same request cannot help."""


class CountersignUnavailable(Exception):
    """Countersign did not answer, or answered 5xx / 429, after a few tries."""


def handler(event, _context):
    """`event`: {"request": <the create body without resume>, "task_token", "execution_id",
    "state_name"}, as the state machine's Parameters build it."""
    body = dict(event["request"])
    body["resume"] = {"type": "stepfunctions", "task_token": event["task_token"]}
    key = idempotency_key(event["execution_id"], event["state_name"])
    approval = create(body, key)
    # Only the id leaves this function: the task's output is what Countersign sends later.
    print(json.dumps({"msg": "approval requested", "approval_id": approval["id"],
                      "idempotency_key": key}))
    return {"approval_id": approval["id"]}


def idempotency_key(*parts: str) -> str:
    """The same for every attempt of this state in this execution, so that a retried invocation
    replays the first create instead of asking twice: `sha256:` and the SHA-256 of the execution
    id and the state's name. The state machine computes the same (States.Hash) and goes on only
    when the decision document's `idempotency_key` is it: the answer is to this request."""
    return "sha256:" + hashlib.sha256("#".join(parts).encode()).hexdigest()


def api_key() -> str:
    global _api_key
    if _api_key is None:
        _api_key = _secrets.get_secret_value(SecretId=SECRET_ARN)["SecretString"].strip()
    return _api_key


def create(body: dict, key: str, tries: int = 4) -> dict:
    """POST /approvals, retried with the same Idempotency-Key (and so the same body) on a
    network error, a 5xx or a 429: a retry that follows a create which did land replays its
    answer."""
    data = json.dumps(body).encode()
    for attempt in range(1, tries + 1):
        request = urllib.request.Request(
            f"{API_URL}/approvals", data=data, method="POST",
            headers={"Authorization": f"Bearer {api_key()}",
                     "Content-Type": "application/json", "Idempotency-Key": key})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as error:
            problem = _problem(error)
            if error.code < 500 and error.code != 429:
                # e.g. resume_not_enabled, invalid_request, idempotency_key_reused: its code and
                # detail name the field, never the token (Countersign never echoes it).
                raise CountersignRefused(f"{error.code} {problem}") from None
            why = f"{error.code} {problem}"
        except (urllib.error.URLError, TimeoutError) as error:
            why = f"no answer: {getattr(error, 'reason', error)}"
        if attempt < tries:
            time.sleep(2 ** (attempt - 1))
    raise CountersignUnavailable(why)


def _problem(error: urllib.error.HTTPError) -> str:
    try:
        problem = json.load(error)
        return f"{problem.get('code')}: {problem.get('detail')}"
    except (ValueError, OSError):
        return error.reason

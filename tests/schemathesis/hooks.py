"""Schemathesis hooks for tests/api/openapi.rs: what a real client of this deployment knows.

Only positive cases (valid by the document) are touched; negative ones go out as generated, so
every invalid request is still one the server must refuse.

- Creates name the deployment's configured action type and a policy whose rules list the
  approval's own approvers, and a new body gets a new Idempotency-Key (random types are only ever 400 `unknown_action_type`, random rules
  only 400 `invalid_request`), so the stateful phase reaches real approvals and their votes.
- Votes name an approver the approval lists (read from the approval, as a portal would).
- Webhook deliveries go to the configured source, signed with the source's secret (Standard Webhooks) over the exact bytes
  sent, so the fuzzer reaches the event parser and the inbox, not only 401 `invalid_signature`.
"""

import datetime
import hashlib
import json
import os
import re
import urllib.parse

import requests
import schemathesis
from standardwebhooks.webhooks import Webhook

BASE_URL = os.environ["COUNTERSIGN_FUZZ_BASE_URL"]
REQUESTER_KEY = os.environ["COUNTERSIGN_FUZZ_REQUESTER_KEY"]
ACTION_TYPE = os.environ["COUNTERSIGN_FUZZ_ACTION_TYPE"]
WEBHOOK_SOURCE = os.environ["COUNTERSIGN_FUZZ_WEBHOOK_SOURCE"]
WEBHOOK_SECRET = os.environ["COUNTERSIGN_FUZZ_WEBHOOK_SECRET"]


def positive(case):
    meta = case.meta
    if meta is None:
        return True
    if meta.generation.mode.is_negative:
        return False
    return not any(info.mode.is_negative for info in meta.components.values())


@schemathesis.hook("before_call").apply_to(method="POST", path="/approvals")
def a_configured_create(ctx, case, **kwargs):
    body = case.body
    if not positive(case) or not isinstance(body, dict):
        return
    action, approvers = body.get("action"), body.get("approvers")
    if isinstance(action, dict):
        action["type"] = ACTION_TYPE
    # A client's key names one request: the same body keeps its key (a retry, answered again),
    # another body gets its own (instead of mostly 409 `idempotency_key_reused`).
    headers = dict(case.headers or {})
    key = headers.get("Idempotency-Key")
    if isinstance(key, str) and re.fullmatch(r"[ -~]{1,200}", key):
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        headers["Idempotency-Key"] = f"{key}-{digest}"
        case.headers = headers
    policy = body.get("policy")
    if isinstance(policy, dict) and isinstance(policy.get("rules"), list) and approvers:
        policy["rules"] = [
            {"name": f"rule-{i}", "approvers": approvers[: i + 1], "min_approvals": 1}
            for i in range(min(len(policy["rules"]), len(approvers)))
        ]


@schemathesis.hook("before_call").apply_to(method="GET", path="/approvals/{id}")
def a_short_wait(ctx, case, **kwargs):
    # A held read is held: 25 cases of up to 20 s each would be minutes of waiting. One second
    # exercises the same hold (tests/api/wait.rs takes the long ones).
    # Every phase, negative cases too: a valid wait beside an invalid parameter is still refused
    # at once, and 1 stays valid wherever 2-20 was.
    query = case.query
    if not isinstance(query, dict):
        return
    wait = query.get("wait")
    if isinstance(wait, bool):
        return
    if isinstance(wait, int) and 1 < wait <= 20:
        query["wait"] = 1
    elif isinstance(wait, str) and wait.isdigit() and 1 < int(wait) <= 20:
        query["wait"] = "1"


@schemathesis.hook("before_call").apply_to(method="POST", path="/approvals/{id}/decision")
def a_listed_approver(ctx, case, **kwargs):
    # A decider votes for someone the approval lists: it reads the approval first, as a portal
    # showing it to that person would.
    body = case.body
    if not positive(case) or not isinstance(body, dict) or case.media_type != "application/json":
        return
    approval_id = (case.path_parameters or {}).get("id")
    if not isinstance(approval_id, str):
        return
    reply = requests.get(
        f"{BASE_URL}/approvals/{urllib.parse.quote(approval_id, safe='')}",
        headers={"Authorization": f"Bearer {REQUESTER_KEY}"},
        timeout=10,
    )
    if reply.status_code == 200:
        body["approver"] = reply.json()["approvers"][0]


@schemathesis.hook("before_call").apply_to(method="POST", path_regex="^/webhooks/")
def a_signed_delivery(ctx, case, **kwargs):
    # Sent to the configured source, signed under the case's own webhook-id, and only when the
    # source, the id and the timestamp it came with are valid (the timestamp is then made
    # current): a case that is invalid in any of them goes out as generated.
    headers = dict(case.headers or {})
    msg_id, timestamp = headers.get("webhook-id"), headers.get("webhook-timestamp")
    if not positive(case) or not isinstance(msg_id, str) or not isinstance(timestamp, str):
        return
    if not re.fullmatch(r"[!-~]{1,256}", msg_id) or not re.fullmatch(r"[0-9]{1,19}", timestamp):
        return
    if not (case.path_parameters or {}).get("source"):
        return
    case.path_parameters = {**(case.path_parameters or {}), "source": WEBHOOK_SOURCE}
    raw = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
    case.body = raw
    now = datetime.datetime.now(tz=datetime.timezone.utc)
    headers["webhook-timestamp"] = str(int(now.timestamp()))
    headers["webhook-signature"] = Webhook(WEBHOOK_SECRET).sign(msg_id, now, raw.decode())
    case.headers = headers

"""What a request asks IAM for: (action, resource ARN, condition context) for each resource it
touches, as the Service Authorization Reference lists them for the operations Countersign and
its tests call (https://docs.aws.amazon.com/service-authorization/latest/reference/
list_amazondynamodb.html, list_amazonsqs.html, list_awssecretsmanager.html).

- DynamoDB: the table named by TableName (a name or an ARN); a Query or Scan of an index is
  on `table/NAME/index/INDEX`. BatchGetItem and BatchWriteItem need their action on every table
  of RequestItems. TransactWriteItems has no action of its own: each item needs the action of
  its kind on its table (Put -> PutItem, Update -> UpdateItem, Delete -> DeleteItem,
  ConditionCheck -> ConditionCheckItem), and TransactGetItems GetItem on each ("Amazon DynamoDB
  Transactions: IAM", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/
  transaction-apis-iam.html).
- DynamoDB Streams: the stream ARN (GetRecords: the ARN its shard iterator was opened on).
- SQS: the queue's ARN, from its URL.
- Secrets Manager: the secret's ARN (a name is looked up); BatchGetSecretValue is on `*`, and
  each secret it reads needs GetSecretValue on that secret (the gate checks those one by one).
- Step Functions (list_awsstepfunctions.html): SendTaskSuccess, SendTaskFailure and
  SendTaskHeartbeat list no resource type, so they are evaluated on `*`: a statement that names
  a state machine never allows them (the token is the only thing the request names, and it
  names no resource IAM sees). Whatever the token — unknown, malformed, closed — the
  evaluation is the same, so the gate needs nothing of the token. Other operations: the state
  machine or execution the request names.
- Lambda durable functions' callbacks (SendDurableExecutionCallbackSuccess, Failure, Heartbeat:
  "Security and permissions for Lambda durable functions",
  https://docs.aws.amazon.com/lambda/latest/dg/durable-security.html): the durable execution's
  ARN, `arn:aws:lambda:REGION:ACCOUNT:function:NAME:QUALIFIER/durable-execution/NAME/ID`, which
  the callback id names (local_resume/durable.py); an unqualified function ARN never matches
  it, `function:NAME:*` does. An id that names no durable execution (not of the callback ids'
  form) has no resource to evaluate: nothing is checked, and the request is answered
  InvalidParameterValueException, as a malformed id is, whoever asks.

- KMS (list_awskeymanagementservice.html): Sign and GetPublicKey on the key the request names
  (`KeyId`, an ARN or a key id).
- SES v2 SendEmail (list_amazonsesv2.html; restJson1, `POST /v2/email/outbound-emails`):
  `ses:SendEmail` on the sending identity, `identity/<the From address>` (a grant on
  `identity/*` covers the domain's identity too), and on `configuration-set/<name>` when the
  request names one; the context carries `ses:FromAddress`, `ses:Recipients` (every To, Cc and
  Bcc address) and `ses:ApiVersion` (`2`).

The context carries the DynamoDB condition keys a write can be restricted by:
`dynamodb:Attributes` (the top-level attribute names the request names: its key, and every name
in its update, condition and projection expressions), `dynamodb:LeadingKeys` (the partition key's
value, of a request that names one item; of a Query, the value its key condition gives the
partition key; of a BatchGetItem or BatchWriteItem, every key's it reads or writes in the table) and `dynamodb:ReturnValues` (only when the request gives it: AWS puts a key in the context only
when the request carries it, so a `StringEquals` on it refuses a request that leaves it out), as "Using IAM policy conditions for fine-grained access control" defines them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlparse

from .policy import Context

# Step Functions' operations on a task token: no resource type (list_awsstepfunctions.html).
SFN_TASK_OPERATIONS = ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat")
DURABLE_CALLBACK_ACTIONS = {
    "succeed": "lambda:SendDurableExecutionCallbackSuccess",
    "fail": "lambda:SendDurableExecutionCallbackFailure",
    "heartbeat": "lambda:SendDurableExecutionCallbackHeartbeat",
}


@dataclass(frozen=True)
class Need:
    """One permission a request needs."""

    action: str
    resource: str
    context: Context


def _table_arn(name: str, region: str, account: str) -> str:
    if name.startswith("arn:"):
        return name
    return f"arn:aws:dynamodb:{region}:{account}:table/{name}"


# Names in an expression: `#placeholder` or a bare identifier, the first element of a path.
_PATH_HEAD = re.compile(r"(?<![\w:#.\[])(#?[A-Za-z_][A-Za-z0-9_\-]*)")
_KEYWORDS = {
    "set", "remove", "add", "delete", "and", "or", "not", "between", "in",
    "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with",
    "contains", "size", "if_not_exists", "list_append",
}


def _expression_names(expression: str | None, names: dict[str, str]) -> set[str]:
    """The top-level attribute names an expression reads or writes."""
    found: set[str] = set()
    if not expression:
        return found
    # Drop values (:v) so that they are not read as names.
    text = re.sub(r":[A-Za-z0-9_]+", " ", expression)
    for token in _PATH_HEAD.findall(text):
        if token.startswith("#"):
            found.add(names.get(token, token))
        elif token.lower() not in _KEYWORDS:
            found.add(token)
    return found


def _write_context(body: dict[str, Any]) -> Context:
    names = body.get("ExpressionAttributeNames") or {}
    attributes = set((body.get("Key") or {}).keys()) | set((body.get("Item") or {}).keys())
    for field in ("UpdateExpression", "ConditionExpression", "ProjectionExpression", "KeyConditionExpression", "FilterExpression"):
        attributes |= _expression_names(body.get(field), names)
    attributes |= set((body.get("AttributeUpdates") or {}).keys()) | set((body.get("Expected") or {}).keys())
    context: Context = {"dynamodb:attributes": sorted(attributes)}
    # dynamodb:LeadingKeys, the partition key's value: every table here is keyed by `pk`; a
    # Query's is the value its key condition sets the partition key to.
    key = (body.get("Key") or body.get("Item") or {}).get("pk")
    if isinstance(key, dict) and "S" in key:
        context["dynamodb:leadingkeys"] = [key["S"]]
    elif body.get("KeyConditionExpression"):
        leading = _query_partition_value(body)
        if leading is not None:
            context["dynamodb:leadingkeys"] = [leading]
    # Only when the request carries it, as AWS does: a StringEquals on the key then refuses a
    # request without it, and StringEqualsIfExists lets it through.
    if "ReturnValues" in body:
        context["dynamodb:returnvalues"] = [body["ReturnValues"]]
    if "Select" in body:
        context["dynamodb:select"] = [body["Select"]]
    return context


# `name = :value`, the first equality of a key condition: the partition key's (a key condition
# names the partition key with `=`; Countersign's name it first, before any sort key's).
_EQUALITY = re.compile(r"(#?[A-Za-z_][A-Za-z0-9_\-]*)\s*=\s*(:[A-Za-z0-9_]+)")


def _query_partition_value(body: dict[str, Any]) -> str | None:
    """The string value a Query's key condition gives its partition key: `pk`'s on a table, the
    first equality's on an index."""
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    equalities = [(names.get(n, n), v) for n, v in _EQUALITY.findall(body["KeyConditionExpression"])]
    if not body.get("IndexName"):
        equalities = [e for e in equalities if e[0] == "pk"]
    for _, placeholder in equalities[:1]:
        value = values.get(placeholder) or {}
        if "S" in value:
            return value["S"]
    return None


_TRANSACT_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


def dynamodb(operation: str, body: dict[str, Any], region: str, account: str) -> list[Need]:
    arn = lambda name: _table_arn(name, region, account)  # noqa: E731
    action = f"dynamodb:{operation}"
    if operation == "BatchGetItem":
        # dynamodb:LeadingKeys of a batch: the partition key of every key it reads from the
        # table, so that a ForAllValues condition holds only when each of them matches.
        return [
            Need(action, arn(table), {"dynamodb:leadingkeys": [
                key["pk"]["S"] for key in (request.get("Keys") or []) if "S" in (key.get("pk") or {})
            ]})
            for table, request in (body.get("RequestItems") or {}).items()
        ]
    if operation == "BatchWriteItem":
        # Every key it writes or deletes in the table, as for BatchGetItem.
        return [
            Need(action, arn(table), {"dynamodb:leadingkeys": [
                key["pk"]["S"]
                for request in requests
                for key in [(request.get("PutRequest") or {}).get("Item") or (request.get("DeleteRequest") or {}).get("Key") or {}]
                if "S" in (key.get("pk") or {})
            ]})
            for table, requests in (body.get("RequestItems") or {}).items()
        ]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        needs = []
        for item in body.get("TransactItems") or []:
            for kind, request in item.items():
                needs.append(Need(_TRANSACT_ACTIONS[kind], arn(request["TableName"]), _write_context(request)))
        return needs
    if "TableName" not in body:
        return [Need(action, "*", {})]
    table = arn(body["TableName"])
    if operation in ("Query", "Scan") and body.get("IndexName"):
        table = f"{table}/index/{body['IndexName']}"
    return [Need(action, table, _write_context(body))]


def streams(operation: str, body: dict[str, Any]) -> list[Need]:
    action = f"dynamodb:{operation}"
    if operation == "GetRecords":
        # moto's iterator is "<stream ARN>|1|<id>"; an iterator is opened on one stream.
        return [Need(action, str(body.get("ShardIterator", "")).split("|", 1)[0], {})]
    if "StreamArn" in body:
        return [Need(action, body["StreamArn"], {})]
    return [Need(action, "*", {})]


# SQS's batch operations are authorized by their single action (SQS API permissions reference,
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-api-permissions-reference.html).
_SQS_BATCHES = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def sqs(operation: str, body: dict[str, Any], region: str) -> list[Need]:
    action = f"sqs:{_SQS_BATCHES.get(operation, operation)}"
    url = body.get("QueueUrl")
    if not url:
        return [Need(action, "*", {})]
    path = urlparse(url).path.strip("/").split("/")
    return [Need(action, f"arn:aws:sqs:{region}:{path[0]}:{path[-1]}", {})]


def secretsmanager(operation: str, body: dict[str, Any], secret_arn: Callable[[str], str]) -> list[Need]:
    action = f"secretsmanager:{operation}"
    if "SecretId" in body:
        return [Need(action, secret_arn(body["SecretId"]), {})]
    return [Need(action, "*", {})]


def stepfunctions(operation: str, body: dict[str, Any]) -> list[Need]:
    action = f"states:{operation}"
    if operation in SFN_TASK_OPERATIONS:
        return [Need(action, "*", {})]
    arn = body.get("executionArn") or body.get("stateMachineArn")
    return [Need(action, str(arn) if arn else "*", {})]


def kms(operation: str, body: dict[str, Any], region: str, account: str) -> list[Need]:
    """A KMS operation (list_awskeymanagementservice.html): its action on the key the request
    names, by ARN or by id (an alias is not modelled: Countersign names its key by ARN)."""
    key = str(body.get("KeyId") or "")
    if key.startswith("arn:"):
        return [Need(f"kms:{operation}", key, {})]
    if key.startswith("alias/"):
        return [Need(f"kms:{operation}", f"arn:aws:kms:{region}:{account}:{key}", {})]
    return [Need(f"kms:{operation}", f"arn:aws:kms:{region}:{account}:key/{key}" if key else "*", {})]


def durable_callback(kind: str, callback_id: str, execution_of: Callable[[str], str | None]) -> list[Need]:
    """What a callback call needs: its action on the durable execution its id names; nothing for
    an id that names none (it is refused as malformed, whoever asks)."""
    arn = execution_of(callback_id)
    if arn is None:
        return []
    return [Need(DURABLE_CALLBACK_ACTIONS[kind], arn, {})]


SES_SEND_PATH = "/v2/email/outbound-emails"


def ses_send_email(body: dict[str, Any], region: str, account: str) -> list[Need]:
    """What an SES v2 SendEmail needs: its action on the From identity, and on the
    configuration set it names."""
    sender = str(body.get("FromEmailAddress") or "")
    destination = body.get("Destination") or {}
    recipients = [str(a) for field in ("ToAddresses", "CcAddresses", "BccAddresses")
                  for a in destination.get(field) or []]
    context: Context = {"ses:fromaddress": [sender], "ses:recipients": recipients, "ses:apiversion": ["2"]}
    needs = [Need("ses:SendEmail", f"arn:aws:ses:{region}:{account}:identity/{sender}", context)]
    if body.get("ConfigurationSetName"):
        needs.append(Need("ses:SendEmail",
                          f"arn:aws:ses:{region}:{account}:configuration-set/{body['ConfigurationSetName']}",
                          context))
    return needs

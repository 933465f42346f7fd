"""DynamoDB's limit on an expression's length (patch 13 of moto_patches.py).

13. Any expression string is at most 4 KB. AWS refuses a request whose `ConditionExpression`,
    `UpdateExpression`, `KeyConditionExpression`, `FilterExpression` or `ProjectionExpression`
    — top level, or in a TransactWriteItems / TransactGetItems / BatchGetItem entry — is longer
    (ValidationException "Invalid ConditionExpression: Expression size has exceeded the maximum
    allowed size"; "Expression parameters: The maximum length of any expression string is 4 KB",
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html
    #limits-expression-parameters). moto takes any length, so a condition that grows with the
    data (a vote's check of each group rule, a policy's groups) would pass locally and fail on
    AWS. Counted in UTF-8 bytes, as AWS counts `a=b` as 3 bytes. Checked before anything runs,
    so a refused request writes nothing.
"""

from typing import Any

from moto.core.common_types import TYPE_RESPONSE
from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.responses import DynamoHandler

MAX_EXPRESSION_BYTES = 4 * 1024

EXPRESSION_KEYS = (
    "ConditionExpression",
    "UpdateExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)

_stock_call_action = DynamoHandler.call_action


def too_long(value: Any) -> tuple[str, int] | None:
    """The first expression over the limit in a request's parameters: its key and its size."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in EXPRESSION_KEYS and isinstance(inner, str):
                size = len(inner.encode("utf-8"))
                if size > MAX_EXPRESSION_BYTES:
                    return key, size
            # Items and attribute values hold data, not expressions.
            elif key not in ("Item", "Key", "ExpressionAttributeValues") and (
                found := too_long(inner)
            ):
                return found
    elif isinstance(value, list):
        for inner in value:
            if found := too_long(inner):
                return found
    return None


def call_action(self: DynamoHandler) -> TYPE_RESPONSE:
    """moto's `DynamoHandler.call_action`, refusing an expression over 4 KB first."""
    found = too_long(getattr(self, "params", {}))
    if found is None:
        return _stock_call_action(self)
    key, size = found
    error = MockValidationException(
        f"Invalid {key}: Expression size has exceeded the maximum allowed size; "
        f"expression size: {size}, maximum: {MAX_EXPRESSION_BYTES}"
    )
    # As moto answers a refusal before the action runs (its authorization's path).
    response = error.description, {"status": error.code}
    status, headers, body = self._transform_response(self.response_headers, response)
    headers, body = self._enrich_response(headers, body)
    return status, headers, body

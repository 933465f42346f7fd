"""TransactWriteItems applied at most once per ClientRequestToken (patch 8 of moto_patches.py).

8. TransactWriteItems keeps its ClientRequestToken. A token is valid for 10 minutes after the
   first request using it completes; the same request again with it within that window succeeds
   without being applied again, and a request with the same token but other parameters is refused
   with `IdempotentParameterMismatchException` (TransactWriteItems API reference,
   "ClientRequestToken", https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/
   API_TransactWriteItems.html; developer guide, "Idempotency", https://docs.aws.amazon.com/
   amazondynamodb/latest/developerguide/transaction-apis.html). moto ignored the token: an SDK
   retry of a committed transaction applied it again (an ADD counted twice). Here each token keeps
   a fingerprint of its TransactItems as sent (canonical JSON, so member order does not matter, as
   LocalStack's AWS-validated `test_dynamodb_idempotent_writing` shows; ReturnConsumedCapacity and
   ReturnItemCollectionMetrics left out) and when its first request completed. What AWS does when
   that request was *cancelled* is not documented. The identical request is evaluated again: the
   cancelled one applied nothing, and the one account found says so ("If it failed the first time,
   DynamoDB will apply the writes in the request", Alex DeBrie, "DynamoDB Transactions: Use Cases
   and Examples", https://www.alexdebrie.com/posts/dynamodb-transactions/); if it commits, the
   window counts from that commit. What a *different* request with a cancelled one's token gets
   could not be established: IdempotentParameterMismatchException, as after a commit (the API
   reference states the rule without exception; the stricter choice, and what `Store::transact`
   assumes in giving each try after a cancellation a token of its own). A request refused before
   it ran (a ValidationException) leaves no trace; a token over the 36 characters AWS allows is
   itself refused with `ValidationException`.
"""

import base64
import json
import time
from collections import OrderedDict
from typing import Any

from moto.core.responses import ActionResult
from moto.dynamodb.exceptions import (
    DynamodbException,
    MockValidationException,
    TransactionCanceledException,
)
from moto.dynamodb.responses import DynamoHandler

# How long a ClientRequestToken is remembered. install() reads MOTO_TOKEN_WINDOW_SECONDS (not for
# use outside infra/tests, which start a server with a short window to see a token expire).
TOKEN_WINDOW_SECONDS: float = 10 * 60
TOKEN_MAX_LENGTH = 36


class IdempotentParameterMismatchException(DynamodbException):
    def __init__(self) -> None:
        super().__init__(
            "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
            "The request uses the same client token as a previous, but non-identical request. "
            "Do not reuse a client token with different requests, unless the requests are "
            "identical.",
        )


class TokenUse:
    """What a ClientRequestToken was first used for, and how that ended."""

    def __init__(self, fingerprint: str, committed: bool) -> None:
        self.fingerprint = fingerprint
        self.committed = committed
        self.completed_at = time.monotonic()


_stock_transact_write_items_response = DynamoHandler.transact_write_items


def _bytes_text(value: Any) -> str:
    """Binary attribute values (moto decodes `B` to bytes) in a request's fingerprint."""
    if isinstance(value, (bytes, bytearray)):
        return "b64:" + base64.b64encode(bytes(value)).decode()
    raise TypeError(f"not JSON: {type(value).__name__}")


def transact_write_items_once(self: DynamoHandler) -> ActionResult:
    """`DynamoHandler.transact_write_items`, applied at most once per ClientRequestToken."""
    token = self.body.get("ClientRequestToken")
    if token is None:
        return _stock_transact_write_items_response(self)
    if not isinstance(token, str) or not 1 <= len(token) <= TOKEN_MAX_LENGTH:
        raise MockValidationException(
            f"1 validation error detected: Value '{token}' at 'clientRequestToken' failed to "
            f"satisfy constraint: Member must have length less than or equal to {TOKEN_MAX_LENGTH}"
        )
    # Kept in completion order, so the expired ones are at the front.
    uses: OrderedDict[str, TokenUse] = self.dynamodb_backend.__dict__.setdefault(
        "_token_uses", OrderedDict()
    )
    deadline = time.monotonic() - TOKEN_WINDOW_SECONDS
    while uses and next(iter(uses.values())).completed_at <= deadline:
        uses.popitem(last=False)

    fingerprint = json.dumps(
        self.body.get("TransactItems"), sort_keys=True, separators=(",", ":"), default=_bytes_text
    )
    used = uses.get(token)
    if used is not None:
        if used.fingerprint != fingerprint:
            raise IdempotentParameterMismatchException()
        if used.committed:
            # Already applied: the answer, without applying it again.
            return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})
    try:
        result = _stock_transact_write_items_response(self)
    except TransactionCanceledException:
        # A cancellation completes the request too; an identical retry is evaluated again.
        if used is None:
            uses[token] = TokenUse(fingerprint, committed=False)
        raise
    # Committed (after a cancellation, the window counts from the commit).
    uses.pop(token, None)
    uses[token] = TokenUse(fingerprint, committed=True)
    return result

"""Fixes to moto 5.2.5 that the local stack needs to stay live and fast under real use, and to
refuse what AWS refuses where our code depends on it.

1. A transaction rollback that keeps the tables. moto's `transact_write_items` deep-copies
   every table a transaction touches (items, indexes, the stream shard with every record) before
   applying it, and on cancellation puts the copies in place of the tables. So every transaction
   costs O(table + stream), and every cancelled one (a replayed create, a duplicate webhook, a
   ledger begin that finds its job taken) leaves open shard iterators reading a shard object
   that never receives another record. Here a journal remembers, before each write, the touched
   item as it was (at most 100 items) and each touched stream shard's length; a cancellation
   restores exactly those items and drops the stream records the transaction appended. Same
   table and shard objects, cost O(items in the transaction).

2. Shard iterators that expire, as on AWS (15 minutes). moto keeps every iterator it ever made
   (each GetRecords makes one), so a poller grows it without bound; an expired one answers
   `ExpiredIteratorException`, as DynamoDB Streams does.

3. SQS without quadratic costs. moto checks each received message's retention through
   GetQueueAttributes, which counts every message of the queue (three times), and each sent
   message reads the same attributes: with a backlog of a few hundred jobs a ReceiveMessage took
   a third of a second, all of it under the local stack's one global lock. The retention check
   reads the one attribute it needs, and a message's visibility is computed from `time.time()`
   instead of through naive datetimes (the counts remain, at a fraction of the cost).

4. The host-to-service lookup of moto's dispatcher, memoised: it walks every moto module's URL
   patterns twice per request (about a millisecond, under the lock), though its answer for a
   host never changes.

5. BatchWriteItem refuses two requests for one item. AWS rejects the whole batch with
   `ValidationException` "Provided list of item keys contains duplicates" when, for one table, two
   requests name the same primary key: two PutRequests, or a PutRequest and a DeleteRequest, of
   one key, whatever their other attributes (BatchWriteItem API reference, "DynamoDB rejects the
   entire batch write operation", https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/
   API_BatchWriteItem.html). moto compares whole items, puts apart from deletes and across tables:
   two puts of one key with different attributes were both applied (the last one winning), a put
   and a delete of one key too, and one key put in two tables was refused. Here each table's keys
   are compared (its hash and range key, as moto's own `DynamoType`s, so `{"N": "1"}` and
   `{"N": "1.0"}` are one key). The page's other whole-batch rules are kept or added: more than 25
   requests (moto took any number), and an item over 400 KB (moto refused it, but only after
   writing the requests before it). Every request is checked before the first write, and the
   writes go through the journal of patch 1, so a refused batch writes nothing.

6. SQS refuses the characters XML does not allow. A message body may contain only
   `#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF`; SendMessage
   answers anything else with `InvalidMessageContents` (SendMessage API reference, "MessageBody",
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html;
   for a while those pages said SQS replaced such characters with U+FFFD, the current ones say it
   refuses them, as LocalStack's AWS-validated `test_send_message_with_invalid_payload_characters`
   found). moto checked no character at all. In a SendMessageBatch AWS refuses only the entry: it
   comes back in `Failed` with code `InvalidMessageContents` and SenderFault, and the batch's other
   entries are sent (SendMessageBatch API reference: "The result of sending each message is
   reported individually", and its error list has no InvalidMessageContents,
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html;
   LocalStack's AWS-validated `test_batch_send_with_invalid_char_should_succeed` sends nine good
   bodies and one U+0001 and gets nine sent and that one Failed with this code). A String message
   attribute's value is held to the same characters and refused with `InvalidParameterValue`, as
   AWS does (LocalStack's AWS-validated
   `test_invalid_string_attributes_cause_invalid_parameter_value_error`); in a batch, per entry.

7. SQS sizes in bytes, at 256 KiB. A message's size is the UTF-8 bytes of its body and of its
   attributes' names, types and values (Amazon SQS message quotas,
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html);
   moto counted the body's characters. AWS raised its limit from 256 KiB to 1 MiB in August 2025
   (a queue's `MaximumMessageSize` is its own limit), but our dispatch is built for the 256 KiB
   that queues had until then, so here new queues get `MaximumMessageSize` 262,144 (one may still
   be set up to 1 MiB); a message over its queue's limit is refused with `InvalidParameterValue`,
   and a SendMessageBatch whose entries together exceed 262,144 bytes with
   `AWS.SimpleQueueService.BatchRequestTooLong` (stricter than today's AWS, which takes 1 MiB).
   More than 10 entries stays moto's `AWS.SimpleQueueService.TooManyEntriesInBatchRequest`, as on
   AWS (SendMessageBatch API reference).

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

9. A transaction's items may not exceed 4 MB together (TransactWriteItems API reference, "The
   aggregate size of the items in the transaction cannot exceed 4 MB"); moto took any size. The
   sizes are moto's own (attribute names and values) of each Put's item and each other action's
   key; a larger transaction is refused with `ValidationException` before anything is applied.

10. A global secondary index added to a table backfills before it can be read. UpdateTable's
    Create returns at once, but the index answers `IndexStatus` `CREATING` with `Backfilling`
    true while DynamoDB copies the table's items into it, and a Query of it is refused with
    `ValidationException` "Cannot read from backfilling global secondary index: <name>"
    (developer guide, "Adding a global secondary index to an existing table", phases "Resource
    allocation" and "Backfilling", https://docs.aws.amazon.com/amazondynamodb/latest/
    developerguide/GSI.OnlineOps.html); CloudFormation's update of the table does not wait for
    it. moto made the index ACTIVE and readable at once. Here it backfills for
    MOTO_BACKFILL_SECONDS (5 by default; AWS takes minutes, or hours on a large table), then is
    ACTIVE. Only UpdateTable's indexes: a table's own, made with it, are ACTIVE when it is.

Written against moto 5.2.5 (the transaction below is its own, with the rollback replaced):
`install()` refuses any other version, loudly, rather than patch code it has not read.
"""

import base64
import binascii
import copy
import json
import os
import re
import time
from collections import OrderedDict
from typing import Any

import moto
import moto.sqs.models
from moto.core.exceptions import JsonRESTError
from moto.core.responses import ActionResult
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    DynamodbException,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import GlobalSecondaryIndex
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.responses import DynamoHandler, validate_put_has_empty_keys
from moto.dynamodbstreams.models import DynamoDBStreamsBackend
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.sqs.exceptions import (
    BatchEntryIdsNotDistinct,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    InvalidParameterValue,
    SQSException,
    TooManyEntriesInBatchRequest,
)
from moto.sqs.models import Message, SQSBackend
from moto.secretsmanager.exceptions import ValidationException as SecretsValidationException
from moto.secretsmanager.responses import SecretsManagerResponse
from moto.sqs.responses import SQSResponse
from moto.sqs.utils import validate_message_attributes

MOTO_VERSION = "5.2.5"
ITERATOR_LIFETIME_SECONDS = 15 * 60
BATCH_WRITE_MAX_REQUESTS = 25
TRANSACTION_MAX_BYTES = 4 * 1024 * 1024
# How long a ClientRequestToken is remembered. install() reads MOTO_TOKEN_WINDOW_SECONDS (not for
# use outside infra/tests, which start a server with a short window to see a token expire).
TOKEN_WINDOW_SECONDS: float = 10 * 60
TOKEN_MAX_LENGTH = 36
# The limit of every SQS queue made before August 2025 (AWS now allows up to 1 MiB).
SQS_MESSAGE_MAX_BYTES = 256 * 1024
# Anything but #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
SQS_REFUSED_CHARACTER = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class Journal:
    """What a transaction changed, so that a cancellation can undo exactly that."""

    def __init__(self) -> None:
        # (table, hash key, range key, the item before the write or None), in write order.
        self.items: list[tuple[Any, Any, Any, Any]] = []
        # id(table) -> (the stream shard, its length before the transaction's first write).
        self.streams: dict[int, tuple[Any, int]] = {}

    def remember(self, table: Any, hash_key: Any, range_key: Any, before: Any) -> None:
        # A copy: update_item changes the stored item in place.
        self.items.append((table, hash_key, range_key, copy.deepcopy(before)))
        shard = table.stream_shard
        if shard is not None and id(table) not in self.streams:
            self.streams[id(table)] = (shard, len(shard.items))

    def roll_back(self) -> None:
        for table, hash_key, range_key, before in reversed(self.items):
            if range_key is not None:
                rows = table.items[hash_key]
                if before is None:
                    rows.pop(range_key, None)
                    if not rows:
                        table.items.pop(hash_key, None)
                else:
                    rows[range_key] = before
            elif before is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = before
        for shard, length in self.streams.values():
            del shard.items[length:]


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto 5.2.5's `DynamoDBBackend.transact_write_items`, rolled back by a journal."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    if sum(_action_size(item) for item in transact_items) > TRANSACTION_MAX_BYTES:
        raise MockValidationException(
            "Collection size of items exceeded, which can also be caused by the aggregate size "
            "of the items in the transaction exceeding the 4MB limit"
        )
    journal = Journal()
    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[tuple[str, str, dict[str, Any]] | tuple[None, None, None]] = []
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(list(item.keys())) > 1:
            journal.roll_back()
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")

            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            expression_attribute_names = op.get("ExpressionAttributeNames")
            expression_attribute_values = op.get("ExpressionAttributeValues")
            return_values_on_condition_check_failure = op.get(
                "ReturnValuesOnConditionCheckFailure"
            )

            table = self.get_table(table_name)
            if op_type == "Put":
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]

            check_unicity(table_name, key)

            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(
                    condition_expression,
                    expression_attribute_names,
                    expression_attribute_values,
                )
                if not condition_op.expr(current):
                    if return_values_on_condition_check_failure == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            if op_type != "ConditionCheck":
                hash_key, range_key = self.get_keys_value(table, key)
                journal.remember(table, hash_key, range_key, current)

            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            journal.roll_back()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))  # type: ignore
        except Exception as e:  # noqa: BLE001 - as moto: any other failure cancels the transaction
            errors.append((type(e).__name__, str(e), original_item))  # type: ignore

    if any(code is not None for code, _, _ in errors):
        journal.roll_back()
        raise TransactionCanceledException(errors)


def _attributes_size(attributes: dict[str, Any]) -> int:
    # moto's measure of an item: UTF-8 names plus values as `DynamoType.size` counts them.
    return sum(bytesize(name) + DynamoType(value).size() for name, value in attributes.items())


def _action_size(action: dict[str, Any]) -> int:
    """What one TransactWriteItems action weighs: a Put its item, the others their key."""
    op_type, op = next(iter(action.items()), ("", {}))
    if not isinstance(op, dict):
        return 0
    attributes = op.get("Item") if op_type == "Put" else op.get("Key")
    return _attributes_size(attributes) if isinstance(attributes, dict) else 0


# moto's own message for an empty key attribute in a BatchWriteItem.
EMPTY_KEY_MESSAGE = (
    "One or more parameter values are not valid. The AttributeValue for a key attribute cannot "
    "contain an empty string value. Key: {}"
)


def batch_write_item(self: DynamoHandler) -> ActionResult:
    """moto 5.2.5's `DynamoHandler.batch_write_item`, with AWS's checks, and all or nothing."""
    table_batches: dict[str, list[dict[str, Any]]] = self.body["RequestItems"]
    for table_requests in table_batches.values():
        if len(table_requests) > BATCH_WRITE_MAX_REQUESTS:
            raise MockValidationException(
                "1 validation error detected: Value at 'requestItems' failed to satisfy "
                "constraint: Map value must satisfy constraint: [Member must have length less "
                "than or equal to 25, Member must have length greater than or equal to 1]"
            )
    if sum(len(requests) for requests in table_batches.values()) > BATCH_WRITE_MAX_REQUESTS:
        raise MockValidationException("Too many items requested for the BatchWriteItem call")

    backend = self.dynamodb_backend
    # (table name, table, the key as moto stores it, the item to put or the key to delete, put?).
    writes: list[tuple[str, Any, tuple[DynamoType, DynamoType | None], dict[str, Any], bool]] = []
    for table_name, table_requests in table_batches.items():
        table = backend.get_table(table_name)
        keys: set[tuple[DynamoType, DynamoType | None]] = set()
        for table_request in table_requests:
            request_type, request = next(iter(table_request.items()))
            put = request_type == "PutRequest"
            attrs: dict[str, Any] = request["Item"] if put else request["Key"]
            if put:
                validate_put_has_empty_keys(attrs, table, custom_error_msg=EMPTY_KEY_MESSAGE)
            key = backend.get_keys_value(table, attrs)
            # The key, not the item: a put and a delete, or two puts, of one key are duplicates.
            if key in keys:
                raise MockValidationException("Provided list of item keys contains duplicates")
            keys.add(key)
            if put:
                Item(key[0], key[1], attrs)  # raises ItemSizeTooLarge before anything is written
            writes.append((table_name, table, key, attrs, put))

    journal = Journal()
    try:
        for table_name, table, (hash_key, range_key), attrs, put in writes:
            journal.remember(table, hash_key, range_key, table.get_item(hash_key, range_key))
            if put:
                backend.put_item(table_name, attrs)
            else:
                backend.delete_item(table_name, attrs)
    except Exception:
        journal.roll_back()
        raise

    response = {
        "ConsumedCapacity": [
            {
                "TableName": table_name,
                "CapacityUnits": 1.0,
                "Table": {"CapacityUnits": 1.0},
            }
            for table_name in table_batches
        ],
        "ItemCollectionMetrics": {},
        "UnprocessedItems": {},
    }
    return ActionResult(response)


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


def _invalid_message_contents() -> SQSException:
    # An SQSException itself, not a subclass: moto finds an error's service by its class's module.
    return SQSException(
        "InvalidMessageContents",
        "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to "
        "#xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
    )


def _refused_attribute(attributes: dict[str, Any]) -> str | None:
    """The name of a String message attribute whose value SQS refuses, if any."""
    for name, value in (attributes or {}).items():
        text = value.get("StringValue") if isinstance(value, dict) else None
        if isinstance(text, str) and SQS_REFUSED_CHARACTER.search(text):
            return name
    return None


def _invalid_attribute(name: str) -> InvalidParameterValue:
    return InvalidParameterValue(
        f"Message (user) attribute '{name}' has a value with characters that are not allowed. "
        "Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | "
        "#x10000 to #x10FFFF"
    )


def _encoded_size(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    return len(str(value).encode("utf-8", "surrogatepass"))


def _message_size(body: Any, attributes: dict[str, Any] | None) -> int:
    """A message's size as SQS counts it: its body and its attributes' names, types and values."""
    size = _encoded_size(body or "")
    for name, value in (attributes or {}).items():
        size += _encoded_size(name)
        if not isinstance(value, dict):
            continue
        size += _encoded_size(value.get("DataType", ""))
        if value.get("StringValue") is not None:
            size += _encoded_size(value["StringValue"])
        binary = value.get("BinaryValue")
        if isinstance(binary, str):
            try:
                binary = base64.b64decode(binary, validate=True)
            except (binascii.Error, ValueError):
                pass
        if binary is not None:
            size += _encoded_size(binary)
    return size


def _too_long(limit: int) -> InvalidParameterValue:
    return InvalidParameterValue(
        f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
    )


_stock_send_message = SQSResponse.send_message


def send_message(self: SQSResponse) -> ActionResult:
    """moto's `SQSResponse.send_message`, refusing the characters and sizes AWS refuses."""
    body = self._get_param("MessageBody")
    attributes = self._get_param("MessageAttributes", {})
    if isinstance(body, str) and SQS_REFUSED_CHARACTER.search(body):
        raise _invalid_message_contents()
    refused = _refused_attribute(attributes)
    if refused is not None:
        raise _invalid_attribute(refused)
    queue = self.sqs_backend.get_queue(self._get_queue_name())
    limit = int(queue.maximum_message_size)  # type: ignore[arg-type]
    if _message_size(body, attributes) > limit:
        raise _too_long(limit)
    return _stock_send_message(self)


def send_message_batch(self: SQSResponse) -> ActionResult:
    """moto 5.2.5's `SQSResponse.send_message_batch`: an entry SQS refuses fails alone."""
    queue_name = self._get_queue_name()
    queue = self.sqs_backend.get_queue(queue_name)
    listed = self._get_param("Entries", [])
    if not listed:
        raise EmptyBatchRequest()
    # What refuses the whole request, checked on every entry before any is sent.
    if len(listed) > 10:
        raise TooManyEntriesInBatchRequest(len(listed))
    if any(not re.match(r"^[\w-]{1,80}$", str(entry.get("Id", ""))) for entry in listed):
        raise InvalidBatchEntryId()
    ids: set[str] = set()
    for entry in listed:
        if entry["Id"] in ids:
            raise BatchEntryIdsNotDistinct(entry["Id"])
        ids.add(entry["Id"])
    total = sum(_message_size(e.get("MessageBody"), e.get("MessageAttributes")) for e in listed)
    if total > SQS_MESSAGE_MAX_BYTES:
        raise SQSException(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {SQS_MESSAGE_MAX_BYTES} bytes. "
            f"You have sent {total} bytes.",
        )

    entries: dict[str, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    limit = int(queue.maximum_message_size)  # type: ignore[arg-type]
    for idx, entry in enumerate(listed):
        if "MessageAttributes" in entry:
            validate_message_attributes(entry["MessageAttributes"])
        else:
            entry["MessageAttributes"] = {}
        if "DelaySeconds" not in entry:
            entry["DelaySeconds"] = None
        body = entry.get("MessageBody")
        refused = _refused_attribute(entry["MessageAttributes"])
        error: SQSException | None = None
        if isinstance(body, str) and SQS_REFUSED_CHARACTER.search(body):
            error = _invalid_message_contents()
        elif refused is not None:
            error = _invalid_attribute(refused)
        elif _message_size(body, entry["MessageAttributes"]) > limit:
            error = _too_long(limit)
        if error is not None:
            failed.append(
                {"Id": entry["Id"], "SenderFault": True, "Code": error.code, "Message": str(error)}
            )
        else:
            entries[str(idx)] = entry

    messages: list[Message] = []
    if entries:
        messages, backend_failed = self.sqs_backend.send_message_batch(queue_name, entries)
        failed.extend(backend_failed)

    resp: dict[str, Any] = {"Successful": [], "Failed": failed}
    for msg in messages:
        msg_dict = {
            "Id": msg.user_id,  # type: ignore[attr-defined]
            "MessageId": msg.id,
            "MD5OfMessageBody": msg.body_md5,
        }
        if len(msg.message_attributes) > 0:
            msg_dict["MD5OfMessageAttributes"] = msg.attribute_md5
        if queue.fifo_queue:
            msg_dict["SequenceNumber"] = msg.sequence_number
        resp["Successful"].append(msg_dict)
    return ActionResult(resp)


class ExpiredIteratorException(JsonRESTError):
    def __init__(self) -> None:
        super().__init__(
            "ExpiredIteratorException",
            "Iterator expired. The iterator was created more than 15 minutes ago.",
        )


_stock_get_shard_iterator = DynamoDBStreamsBackend.get_shard_iterator


def _forget_expired(backend: DynamoDBStreamsBackend) -> None:
    # Iterators are kept in creation order (a dict), with their birth time beside them.
    born = backend.__dict__.setdefault("_iterator_born", {})
    deadline = time.monotonic() - ITERATOR_LIFETIME_SECONDS
    while born:
        arn, at = next(iter(born.items()))
        if at > deadline:
            break
        del born[arn]
        backend.shard_iterators.pop(arn, None)


def _track(backend: DynamoDBStreamsBackend, arn: str) -> None:
    _forget_expired(backend)
    backend.__dict__.setdefault("_iterator_born", {})[arn] = time.monotonic()


def get_shard_iterator(self: DynamoDBStreamsBackend, *args: Any, **kwargs: Any) -> Any:
    iterator = _stock_get_shard_iterator(self, *args, **kwargs)
    _track(self, iterator.arn)
    return iterator


def get_records(self: DynamoDBStreamsBackend, iterator_arn: str, limit: int) -> dict[str, Any]:
    _forget_expired(self)
    shard_iterator = self.shard_iterators.get(iterator_arn)
    if shard_iterator is None:
        raise ExpiredIteratorException()
    result = shard_iterator.get(limit)
    _track(self, result["NextShardIterator"])
    return result


def is_message_valid_based_on_retention_period(
    self: SQSBackend, queue_name: str, message: Message
) -> bool:
    retention_period = int(self.get_queue(queue_name).message_retention_period)
    return retention_period + message.sent_timestamp / 1000 > time.time()


def _visible(message: Message) -> bool:
    return time.time() * 1000 > message.visible_at


def _delayed(message: Message) -> bool:
    return time.time() * 1000 < message.delayed_until


# Secrets Manager (AWS Secrets Manager API Reference, CreateSecret / PutSecretValue /
# UpdateSecret: "SecretString … Length Constraints: Maximum length of 65536"; BatchGetSecretValue:
# "SecretIdList … Array Members: Minimum number of 1 item. Maximum number of 20 items"). moto
# 5.2.5 takes a value of any size and a list of any length.
SECRET_STRING_MAX_CHARS = 65536
BATCH_GET_MAX_SECRETS = 20


def _secret_string_checked(stock: Any) -> Any:
    def checked(self: SecretsManagerResponse) -> str:
        value = self._get_param("SecretString")
        if isinstance(value, str) and len(value) > SECRET_STRING_MAX_CHARS:
            raise SecretsValidationException(
                "1 validation error detected: Value at 'secretString' failed to satisfy "
                f"constraint: Member must have length less than or equal to {SECRET_STRING_MAX_CHARS}"
            )
        return stock(self)

    checked.__doc__ = f"moto's `{stock.__name__}`, refusing a SecretString over 65,536 characters."
    return checked


_stock_batch_get_secret_value = SecretsManagerResponse.batch_get_secret_value


def batch_get_secret_value(self: SecretsManagerResponse) -> str:
    """moto's `batch_get_secret_value`, refusing more than 20 secret ids, as AWS does."""
    ids = self._get_param("SecretIdList", if_none=[])
    if len(ids) > BATCH_GET_MAX_SECRETS:
        raise SecretsValidationException(
            "1 validation error detected: Value at 'secretIdList' failed to satisfy constraint: "
            f"Member must have length less than or equal to {BATCH_GET_MAX_SECRETS}"
        )
    return _stock_batch_get_secret_value(self)


_stock_backend_for_host = DomainDispatcherApplication.get_backend_for_host


# How long an index added by UpdateTable backfills. install() reads MOTO_BACKFILL_SECONDS.
BACKFILL_SECONDS = 5.0
_stock_update_table_global_indexes = DynamoDBBackend.update_table_global_indexes
_stock_query = DynamoDBBackend.query
_stock_gsi_describe = GlobalSecondaryIndex.describe


def _backfilling(index: Any) -> bool:
    return time.time() < getattr(index, "backfilled_at", 0.0)


def update_table_global_indexes(
    self: DynamoDBBackend, table: Any, global_index_updates: list[dict[str, Any]]
) -> None:
    _stock_update_table_global_indexes(self, table, global_index_updates)
    created = {u["Create"]["IndexName"] for u in global_index_updates if u.get("Create")}
    for index in table.global_indexes:
        if index.name in created:
            index.backfilled_at = time.time() + BACKFILL_SECONDS


def query(self: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Any:
    name = kwargs.get("index_name")
    if name:
        index = next((i for i in self.get_table(table_name).global_indexes if i.name == name), None)
        if index is not None and _backfilling(index):
            raise MockValidationException(f"Cannot read from backfilling global secondary index: {name}")
    return _stock_query(self, table_name, *args, **kwargs)


def describe_global_index(self: GlobalSecondaryIndex) -> dict[str, Any]:
    described = _stock_gsi_describe(self)
    if _backfilling(self):
        described["IndexStatus"] = "CREATING"
        described["Backfilling"] = True
    return described


def get_backend_for_host(self: DomainDispatcherApplication, host: str | None) -> Any:
    known = self.__dict__.setdefault("_backend_by_host", {})
    if host not in known:
        known[host] = _stock_backend_for_host(self, host)
    return known[host]


def install() -> None:
    """Patches moto in this process. Refuses any moto but the one this was written against."""
    global TOKEN_WINDOW_SECONDS, BACKFILL_SECONDS
    if moto.__version__ != MOTO_VERSION:
        raise SystemExit(
            f"infra/moto_patches.py is written against moto {MOTO_VERSION}, but moto "
            f"{moto.__version__} is installed: pin moto[server]=={MOTO_VERSION} in "
            "infra/requirements.txt, or port the patch to the new version's "
            "transact_write_items (and its tests in infra/tests/)."
        )
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    DynamoDBStreamsBackend.get_shard_iterator = get_shard_iterator  # type: ignore[method-assign]
    DynamoDBStreamsBackend.get_records = get_records  # type: ignore[method-assign]
    SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )
    Message.visible = property(_visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(_delayed)  # type: ignore[method-assign,assignment]
    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]
    DynamoHandler.batch_write_item = batch_write_item  # type: ignore[method-assign]
    BACKFILL_SECONDS = float(os.environ.get("MOTO_BACKFILL_SECONDS", BACKFILL_SECONDS))
    DynamoDBBackend.update_table_global_indexes = update_table_global_indexes  # type: ignore[method-assign]
    DynamoDBBackend.query = query  # type: ignore[method-assign]
    GlobalSecondaryIndex.describe = describe_global_index  # type: ignore[method-assign]
    TOKEN_WINDOW_SECONDS = float(os.environ.get("MOTO_TOKEN_WINDOW_SECONDS", TOKEN_WINDOW_SECONDS))
    DynamoHandler.transact_write_items = transact_write_items_once  # type: ignore[method-assign]
    SQSResponse.send_message = send_message  # type: ignore[method-assign]
    for name in ("create_secret", "put_secret_value", "update_secret"):
        setattr(SecretsManagerResponse, name, _secret_string_checked(getattr(SecretsManagerResponse, name)))
    SecretsManagerResponse.batch_get_secret_value = batch_get_secret_value  # type: ignore[method-assign]
    SQSResponse.send_message_batch = send_message_batch  # type: ignore[method-assign]
    # The default MaximumMessageSize of a new queue (moto reads it when creating one).
    moto.sqs.models.MAXIMUM_MESSAGE_LENGTH = SQS_MESSAGE_MAX_BYTES  # type: ignore[misc]

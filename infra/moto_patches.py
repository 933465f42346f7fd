"""Fixes to moto 5.2.5 that the local stack needs to stay live and fast under real use.

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

Written against moto 5.2.5 (the transaction below is its own, with the rollback replaced):
`install()` refuses any other version, loudly, rather than patch code it has not read.
"""

import copy
import time
from typing import Any

import moto
from moto.core.exceptions import JsonRESTError
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodbstreams.models import DynamoDBStreamsBackend
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.sqs.models import Message, SQSBackend

MOTO_VERSION = "5.2.5"
ITERATOR_LIFETIME_SECONDS = 15 * 60


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


_stock_backend_for_host = DomainDispatcherApplication.get_backend_for_host


def get_backend_for_host(self: DomainDispatcherApplication, host: str | None) -> Any:
    known = self.__dict__.setdefault("_backend_by_host", {})
    if host not in known:
        known[host] = _stock_backend_for_host(self, host)
    return known[host]


def install() -> None:
    """Patches moto in this process. Refuses any moto but the one this was written against."""
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

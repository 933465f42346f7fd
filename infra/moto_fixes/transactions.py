"""TransactWriteItems as moto 5.2.5 runs it, with its rollback replaced by the journal and
AWS's 4 MB limit added (patches 1 and 9 of moto_patches.py).

1. A transaction rollback that keeps the tables. moto's `transact_write_items` deep-copies
   every table a transaction touches (items, indexes, the stream shard with every record) before
   applying it, and on cancellation puts the copies in place of the tables. So every transaction
   costs O(table + stream), and every cancelled one (a replayed create, a duplicate webhook, a
   ledger begin that finds its job taken) leaves open shard iterators reading a shard object
   that never receives another record. Here a journal remembers, before each write, the touched
   item as it was (at most 100 items) and each touched stream shard's length; a cancellation
   restores exactly those items and drops the stream records the transaction appended. Same
   table and shard objects, cost O(items in the transaction).

9. A transaction's items may not exceed 4 MB together (TransactWriteItems API reference, "The
   aggregate size of the items in the transaction cannot exceed 4 MB"); moto took any size. The
   sizes are moto's own (attribute names and values) of each Put's item and each other action's
   key; a larger transaction is refused with `ValidationException` before anything is applied.
"""

from typing import Any

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
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.utilities import bytesize

from .journal import Journal

TRANSACTION_MAX_BYTES = 4 * 1024 * 1024


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

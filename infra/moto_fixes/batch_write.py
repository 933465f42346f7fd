"""BatchWriteItem with AWS's whole-batch checks, all or nothing (patch 5 of moto_patches.py).

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
"""

from typing import Any

from moto.core.responses import ActionResult
from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.responses import DynamoHandler, validate_put_has_empty_keys

from .journal import Journal

BATCH_WRITE_MAX_REQUESTS = 25

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

"""A global secondary index added by UpdateTable backfills before it can be read (patch 10 of
moto_patches.py).

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
"""

import time
from typing import Any

from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import GlobalSecondaryIndex

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

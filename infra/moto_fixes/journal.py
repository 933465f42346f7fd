"""The journal of patch 1 (moto_patches.py): what a write changed, so that a cancelled
transaction, or a BatchWriteItem refused half-way (patch 5), undoes exactly that and keeps the
same table and stream shard objects (moto's own rollback swapped in deep copies of them).
"""

import copy
from typing import Any


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

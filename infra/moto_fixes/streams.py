"""DynamoDB Streams' shard iterators, expiring as on AWS (patch 2 of moto_patches.py).

2. Shard iterators that expire, as on AWS (15 minutes). moto keeps every iterator it ever made
   (each GetRecords makes one), so a poller grows it without bound; an expired one answers
   `ExpiredIteratorException`, as DynamoDB Streams does.
"""

import time
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.dynamodbstreams.models import DynamoDBStreamsBackend

ITERATOR_LIFETIME_SECONDS = 15 * 60


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

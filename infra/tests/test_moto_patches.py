"""The local stack's patched moto (infra/moto_patches.py), served by infra/moto_server.py and
driven over the wire with boto3: a cancelled transaction changes nothing and leaves open shard
iterators working, and a transaction's cost does not grow with the table.

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

import time
import unittest

from botocore.exceptions import ClientError

from moto_process import MotoServer


class PatchedMoto(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.moto = MotoServer()
        cls.db = cls.moto.client("dynamodb")
        cls.streams = cls.moto.client("dynamodbstreams")
        cls.tables = 0

    @classmethod
    def tearDownClass(cls) -> None:
        cls.moto.stop()

    def table(self) -> tuple[str, str]:
        """A fresh table with a NEW_AND_OLD_IMAGES stream: (name, stream ARN)."""
        type(self).tables += 1
        name = f"journal-{self.tables}"
        described = self.db.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        return name, described["TableDescription"]["LatestStreamArn"]

    def iterator(self, arn: str, kind: str = "TRIM_HORIZON") -> str:
        shard = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
        return self.streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType=kind
        )["ShardIterator"]

    def records(self, arn: str) -> list[dict]:
        return self.streams.get_records(ShardIterator=self.iterator(arn), Limit=1000)["Records"]

    def item(self, table: str, pk: str) -> dict | None:
        return self.db.get_item(TableName=table, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")

    def put(self, table: str, pk: str, **attrs: str) -> None:
        item = {"pk": {"S": pk}, **{k: {"S": v} for k, v in attrs.items()}}
        self.db.put_item(TableName=table, Item=item)

    def cancelled(self, table: str, existing: str, updated: str, created: str) -> ClientError:
        """A transaction whose first two writes apply before its third is refused."""
        with self.assertRaises(ClientError) as raised:
            self.db.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": table,
                            "Key": {"pk": {"S": updated}},
                            "UpdateExpression": "SET #v = :v",
                            "ExpressionAttributeNames": {"#v": "v"},
                            "ExpressionAttributeValues": {":v": {"S": "changed"}},
                        }
                    },
                    {"Put": {"TableName": table, "Item": {"pk": {"S": created}, "v": {"S": "new"}}}},
                    {
                        "Put": {
                            "TableName": table,
                            "Item": {"pk": {"S": existing}, "v": {"S": "overwritten"}},
                            "ConditionExpression": "attribute_not_exists(pk)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                ]
            )
        return raised.exception

    def test_a_cancelled_transaction_changes_no_item_and_adds_no_stream_record(self) -> None:
        table, arn = self.table()
        self.put(table, "a", v="original")
        self.put(table, "b", v="original")
        before = self.records(arn)
        error = self.cancelled(table, existing="b", updated="a", created="c")
        self.assertEqual(error.response["Error"]["Code"], "TransactionCanceledException")
        self.assertEqual(self.item(table, "a")["v"], {"S": "original"})
        self.assertEqual(self.item(table, "b")["v"], {"S": "original"})
        self.assertIsNone(self.item(table, "c"))
        self.assertEqual(len(self.records(arn)), len(before))
        self.assertEqual(self.db.scan(TableName=table, ConsistentRead=True)["Count"], 2)

    def test_a_committed_transaction_applies_every_write_and_streams_it(self) -> None:
        table, arn = self.table()
        self.put(table, "a", v="original")
        self.db.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": {"pk": {"S": "a"}},
                        "UpdateExpression": "SET #v = :v",
                        "ConditionExpression": "#v = :was",
                        "ExpressionAttributeNames": {"#v": "v"},
                        "ExpressionAttributeValues": {":v": {"S": "changed"}, ":was": {"S": "original"}},
                    }
                },
                {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}, "v": {"S": "new"}}}},
            ]
        )
        self.assertEqual(self.item(table, "a")["v"], {"S": "changed"})
        self.assertEqual(self.item(table, "b")["v"], {"S": "new"})
        events = [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in self.records(arn)]
        self.assertEqual(events, [("INSERT", "a"), ("MODIFY", "a"), ("INSERT", "b")])

    def test_a_refused_transaction_returns_the_old_item(self) -> None:
        table, _ = self.table()
        self.put(table, "a", v="original")
        self.put(table, "b", v="kept", extra="x")
        error = self.cancelled(table, existing="b", updated="a", created="c")
        reasons = error.response["CancellationReasons"]
        self.assertEqual([r["Code"] for r in reasons], ["None", "None", "ConditionalCheckFailed"])
        self.assertEqual(reasons[2]["Item"], {"pk": {"S": "b"}, "v": {"S": "kept"}, "extra": {"S": "x"}})

    def test_a_shard_iterator_opened_before_a_cancelled_transaction_sees_later_records(self) -> None:
        table, arn = self.table()
        self.put(table, "a", v="original")
        self.put(table, "b", v="original")
        iterator = self.iterator(arn, "LATEST")
        self.cancelled(table, existing="b", updated="a", created="c")
        self.put(table, "d", v="after")
        read = self.streams.get_records(ShardIterator=iterator, Limit=100)
        self.assertEqual([r["dynamodb"]["Keys"]["pk"]["S"] for r in read["Records"]], ["d"])
        # And the iterator it hands on keeps following the same shard.
        self.cancelled(table, existing="b", updated="a", created="c")
        self.put(table, "e", v="after")
        again = self.streams.get_records(ShardIterator=read["NextShardIterator"], Limit=100)
        self.assertEqual([r["dynamodb"]["Keys"]["pk"]["S"] for r in again["Records"]], ["e"])

    def test_a_transaction_naming_one_item_twice_is_refused_whole(self) -> None:
        table, arn = self.table()
        self.put(table, "a", v="original")
        before = len(self.records(arn))
        with self.assertRaises(ClientError) as raised:
            self.db.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": table, "Item": {"pk": {"S": "a"}, "v": {"S": "first"}}}},
                    {"Put": {"TableName": table, "Item": {"pk": {"S": "a"}, "v": {"S": "second"}}}},
                ]
            )
        self.assertEqual(raised.exception.response["Error"]["Code"], "ValidationException")
        self.assertEqual(self.item(table, "a")["v"], {"S": "original"})
        self.assertEqual(len(self.records(arn)), before)

    def test_an_unknown_iterator_is_expired_not_a_server_error(self) -> None:
        _, arn = self.table()
        iterator = self.iterator(arn)
        with self.assertRaises(ClientError) as raised:
            self.streams.get_records(ShardIterator=iterator[:-8] + "AAAAAAA=", Limit=10)
        self.assertEqual(raised.exception.response["Error"]["Code"], "ExpiredIteratorException")

    def test_the_cost_of_a_transaction_does_not_grow_with_the_table(self) -> None:
        empty, _ = self.table()
        full, _ = self.table()
        for start in range(0, 20_000, 25):
            self.db.batch_write_item(
                RequestItems={
                    full: [
                        {"PutRequest": {"Item": {"pk": {"S": f"filler-{i}"}, "v": {"S": "x" * 100}}}}
                        for i in range(start, start + 25)
                    ]
                }
            )
        self.assertEqual(self.db.describe_table(TableName=full)["Table"]["ItemCount"], 20_000)

        def transactions(table: str, round_: int, count: int) -> float:
            started = time.perf_counter()
            for i in range(count):
                key = f"{round_}-{i}"
                # Half commit, half are cancelled (the key exists by then): both paths count.
                for _ in range(2):
                    try:
                        self.db.transact_write_items(
                            TransactItems=[
                                {
                                    "Put": {
                                        "TableName": table,
                                        "Item": {"pk": {"S": key}, "v": {"S": "t"}},
                                        "ConditionExpression": "attribute_not_exists(pk)",
                                    }
                                },
                                {"Put": {"TableName": table, "Item": {"pk": {"S": f"{key}-2"}}}},
                            ]
                        )
                    except ClientError:
                        pass
            return time.perf_counter() - started

        # Interleaved rounds, so that any drift of the machine hits both tables alike.
        timings = {empty: 0.0, full: 0.0}
        for round_ in range(10):
            for table in (empty, full) if round_ % 2 == 0 else (full, empty):
                timings[table] += transactions(table, round_, 10)
        ratio = timings[full] / timings[empty]
        print(
            f"\n200 transactions: empty table {timings[empty]:.2f} s, "
            f"20,000 items {timings[full]:.2f} s, ratio {ratio:.2f}"
        )
        self.assertLessEqual(ratio, 1.5)


class VersionPin(unittest.TestCase):
    def test_another_moto_version_is_refused_loudly(self) -> None:
        import moto

        import moto_patches

        real = moto.__version__
        moto.__version__ = "5.2.6"
        try:
            with self.assertRaises(SystemExit) as refused:
                moto_patches.install()
            self.assertIn("written against moto 5.2.5", str(refused.exception))
        finally:
            moto.__version__ = real


if __name__ == "__main__":
    unittest.main()

"""What AWS refuses, the local stack refuses (infra/moto_patches.py, patches 5 to 9 and 13), driven over
the wire with boto3 against infra/moto_server.py: BatchWriteItem's duplicate keys and limits,
the characters and sizes SQS takes, TransactWriteItems' ClientRequestToken and 4 MB limit.

Each test names the AWS rule it holds the local stack to, and its documentation page.

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

import time
import unittest
from typing import Any

from botocore.exceptions import ClientError

from moto_process import MotoServer

# Characters SQS refuses, and some at the edges of what it takes.
REFUSED = {
    "ffff": "\uffff",
    "fffe": "\ufffe",
    "x01": "\x01",
    "x00": "\x00",
    "x1f": "\x1f",
    "d800": "\ud800",
}
ACCEPTED = {
    "tab": "\t",
    "lf": "\n",
    "cr": "\r",
    "d7ff": "\ud7ff",
    "e000": "\ue000",
    "fffd": "\ufffd",
    "u10000": "\U00010000",
    "emoji": "\U0001f600",
}


class Stack(unittest.TestCase):
    """A test class with a server of its own and helpers to make fresh tables and queues."""

    env: dict[str, str] = {}

    @classmethod
    def setUpClass(cls) -> None:
        cls.moto = MotoServer(cls.env)
        cls.db = cls.moto.client("dynamodb")
        cls.streams = cls.moto.client("dynamodbstreams")
        cls.sqs = cls.moto.client("sqs")
        cls.made = 0

    @classmethod
    def tearDownClass(cls) -> None:
        cls.moto.stop()

    def name(self, kind: str) -> str:
        type(self).made += 1
        return f"{kind}-{self.made}"

    def table(self, range_key: bool = False) -> tuple[str, str]:
        """A fresh table (pk, and sk if `range_key`) with a stream: (name, stream ARN)."""
        name = self.name("rules")
        attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
        schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
        if range_key:
            attributes.append({"AttributeName": "sk", "AttributeType": "S"})
            schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
        described = self.db.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=attributes,
            KeySchema=schema,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        return name, described["TableDescription"]["LatestStreamArn"]

    def items(self, table: str) -> list[dict[str, Any]]:
        """Every item of `table` (a scan answers at most 1 MB at a time)."""
        found: list[dict[str, Any]] = []
        start: dict[str, Any] = {}
        while True:
            page = self.db.scan(TableName=table, ConsistentRead=True, **start)
            found += page["Items"]
            if "LastEvaluatedKey" not in page:
                return found
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    def records(self, arn: str) -> list[dict[str, Any]]:
        shard = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
        iterator = self.streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        return self.streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]

    def refused(self, code: str, call: Any, **kwargs: Any) -> ClientError:
        with self.assertRaises(ClientError) as raised:
            call(**kwargs)
        self.assertEqual(raised.exception.response["Error"]["Code"], code, raised.exception)
        return raised.exception

    def queue(self) -> str:
        return self.sqs.create_queue(QueueName=self.name("rules"))["QueueUrl"]

    def bodies(self, queue: str) -> list[str]:
        """Every message body in `queue` (received, so no longer visible)."""
        got: list[str] = []
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=300
            ).get("Messages", [])
            if not messages:
                return got
            got += [m["Body"] for m in messages]

    def counter(self, table: str, pk: str) -> int | None:
        item = self.db.get_item(TableName=table, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")
        return None if item is None else int(item["n"]["N"])

    def add(self, table: str, pk: str, by: int = 1, **kwargs: Any) -> dict[str, Any]:
        """A transaction adding `by` to item `pk`'s counter `n`; `kwargs` go to the request."""
        update = {
            "TableName": table,
            "Key": {"pk": {"S": pk}},
            "UpdateExpression": "ADD #n :by",
            "ExpressionAttributeNames": {"#n": "n"},
            "ExpressionAttributeValues": {":by": {"N": str(by)}},
        }
        update.update(kwargs.pop("update", {}))
        return self.db.transact_write_items(TransactItems=[{"Update": update}], **kwargs)


class BatchWriteItemRules(Stack):
    def test_two_puts_of_one_key_with_other_attributes_are_refused_and_nothing_is_written(self) -> None:
        """BatchWriteItem: "Your request contains at least two items with identical hash and range
        keys" rejects the entire batch with ValidationException, whatever the items' other
        attributes (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html).
        """
        table, arn = self.table()
        error = self.refused(
            "ValidationException",
            self.db.batch_write_item,
            RequestItems={
                table: [
                    {"PutRequest": {"Item": {"pk": {"S": "other"}}}},
                    {"PutRequest": {"Item": {"pk": {"S": "a"}, "v": {"S": "first"}}}},
                    {"PutRequest": {"Item": {"pk": {"S": "a"}, "v": {"S": "second"}}}},
                ]
            },
        )
        self.assertIn("Provided list of item keys contains duplicates", str(error))
        self.assertEqual(self.items(table), [])
        self.assertEqual(self.records(arn), [])

    def test_a_put_and_a_delete_of_one_key_are_refused(self) -> None:
        """BatchWriteItem: "You try to perform multiple operations on the same item in the same
        BatchWriteItem request. For example, you cannot put and delete the same item" rejects the
        entire batch with ValidationException
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html).
        """
        table, arn = self.table()
        self.db.put_item(TableName=table, Item={"pk": {"S": "a"}, "v": {"S": "original"}})
        before = len(self.records(arn))
        error = self.refused(
            "ValidationException",
            self.db.batch_write_item,
            RequestItems={
                table: [
                    {"PutRequest": {"Item": {"pk": {"S": "a"}, "v": {"S": "changed"}}}},
                    {"PutRequest": {"Item": {"pk": {"S": "b"}}}},
                    {"DeleteRequest": {"Key": {"pk": {"S": "a"}}}},
                ]
            },
        )
        self.assertIn("Provided list of item keys contains duplicates", str(error))
        self.assertEqual(self.items(table), [{"pk": {"S": "a"}, "v": {"S": "original"}}])
        self.assertEqual(len(self.records(arn)), before)

    def test_one_hash_key_with_distinct_range_keys_is_not_a_duplicate(self) -> None:
        """BatchWriteItem: a duplicate is two requests with identical hash *and* range keys
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html),
        so one hash key with distinct range keys is written, puts and deletes alike; and the same
        key in two tables is no duplicate either.
        """
        table, _ = self.table(range_key=True)
        other, _ = self.table(range_key=True)
        self.db.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "3"}})

        def key(sk: str) -> dict[str, Any]:
            return {"pk": {"S": "a"}, "sk": {"S": sk}}

        self.db.batch_write_item(
            RequestItems={
                table: [
                    {"PutRequest": {"Item": {**key("1"), "v": {"S": "x"}}}},
                    {"PutRequest": {"Item": {**key("2"), "v": {"S": "x"}}}},
                    {"DeleteRequest": {"Key": key("3")}},
                ],
                other: [{"PutRequest": {"Item": {**key("1"), "v": {"S": "x"}}}}],
            }
        )
        self.assertEqual(sorted(i["sk"]["S"] for i in self.items(table)), ["1", "2"])
        self.assertEqual(len(self.items(other)), 1)

    def test_more_than_25_requests_are_refused_and_nothing_is_written(self) -> None:
        """BatchWriteItem: "There are more than 25 requests in the batch" rejects the entire batch
        with ValidationException
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html),
        in one table or across several.
        """
        table, _ = self.table()
        other, _ = self.table()

        def puts(n: int, prefix: str) -> list[dict[str, Any]]:
            return [{"PutRequest": {"Item": {"pk": {"S": f"{prefix}{i}"}}}} for i in range(n)]

        self.refused(
            "ValidationException", self.db.batch_write_item, RequestItems={table: puts(26, "k")}
        )
        self.refused(
            "ValidationException",
            self.db.batch_write_item,
            RequestItems={table: puts(13, "k"), other: puts(13, "k")},
        )
        self.assertEqual(self.items(table) + self.items(other), [])
        self.db.batch_write_item(RequestItems={table: puts(25, "k")})
        self.assertEqual(len(self.items(table)), 25)

    def test_an_item_over_400_kb_refuses_the_batch_and_nothing_is_written(self) -> None:
        """BatchWriteItem: "Any individual item in a batch exceeds 400 KB" rejects the entire batch
        with ValidationException
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html):
        none of its writes is applied, not even those before the large item.
        """
        table, arn = self.table()
        self.refused(
            "ValidationException",
            self.db.batch_write_item,
            RequestItems={
                table: [
                    {"PutRequest": {"Item": {"pk": {"S": "small"}}}},
                    {"PutRequest": {"Item": {"pk": {"S": "large"}, "v": {"S": "x" * 410_000}}}},
                ]
            },
        )
        self.assertEqual(self.items(table), [])
        self.assertEqual(self.records(arn), [])


class SqsRules(Stack):
    def test_send_message_refuses_the_characters_xml_does_not_allow(self) -> None:
        """SendMessage: a body may contain only #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD
        | #x10000 to #x10FFFF; anything else is refused with InvalidMessageContents
        (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
        """
        queue = self.queue()
        for name, char in REFUSED.items():
            with self.subTest(refused=name):
                self.refused(
                    "InvalidMessageContents",
                    self.sqs.send_message,
                    QueueUrl=queue,
                    MessageBody=f"a{char}b",
                )
        for name, char in ACCEPTED.items():
            with self.subTest(accepted=name):
                self.sqs.send_message(QueueUrl=queue, MessageBody=f"a{char}b")
        self.assertEqual(sorted(self.bodies(queue)), sorted(f"a{c}b" for c in ACCEPTED.values()))

    def test_a_batch_entry_with_a_refused_character_fails_alone(self) -> None:
        """SendMessageBatch: the result of each message is reported individually; an entry whose
        body has a character outside #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000
        to #x10FFFF comes back in Failed with InvalidMessageContents, the other entries are sent
        (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
        """
        queue = self.queue()
        bad = {"ffff": "\uffff", "fffe": "\ufffe", "x01": "\x01"}
        good = {k: ACCEPTED[k] for k in ("tab", "d7ff", "e000", "fffd", "emoji")}
        entries = [{"Id": f"bad-{k}", "MessageBody": f"a{c}b"} for k, c in bad.items()]
        entries += [{"Id": f"good-{k}", "MessageBody": f"a{c}b"} for k, c in good.items()]
        sent = self.sqs.send_message_batch(QueueUrl=queue, Entries=entries)
        self.assertEqual(
            sorted((f["Id"], f["Code"], f["SenderFault"]) for f in sent.get("Failed", [])),
            sorted((f"bad-{k}", "InvalidMessageContents", True) for k in bad),
        )
        self.assertEqual(sorted(s["Id"] for s in sent["Successful"]), sorted(f"good-{k}" for k in good))
        self.assertEqual(sorted(self.bodies(queue)), sorted(f"a{c}b" for c in good.values()))

    def test_a_string_attribute_with_a_refused_character_is_refused(self) -> None:
        """SendMessage, "MessageAttributes": a String attribute's value is held to the characters
        of a body, else InvalidParameterValue (not in the API reference,
        https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html,
        but what AWS answers in LocalStack's AWS-validated
        test_invalid_string_attributes_cause_invalid_parameter_value_error); in a
        SendMessageBatch only that entry fails, each message's result reported individually.
        """
        queue = self.queue()
        bad = {"kind": {"DataType": "String", "StringValue": "a\x01b"}}
        self.refused(
            "InvalidParameterValue",
            self.sqs.send_message,
            QueueUrl=queue,
            MessageBody="x",
            MessageAttributes=bad,
        )
        sent = self.sqs.send_message_batch(
            QueueUrl=queue,
            Entries=[
                {"Id": "bad", "MessageBody": "x", "MessageAttributes": bad},
                {"Id": "good", "MessageBody": "y"},
            ],
        )
        failed = [(f["Id"], f["Code"]) for f in sent["Failed"]]
        self.assertEqual(failed, [("bad", "InvalidParameterValue")])
        self.assertEqual(self.bodies(queue), ["y"])

    def test_messages_and_batches_are_held_to_256_kib_in_bytes(self) -> None:
        """Amazon SQS message quotas: a message's size is its body's and attributes' bytes, at most
        the queue's MaximumMessageSize (262,144 here, as queues made before August 2025; larger →
        InvalidParameterValue), and a batch's entries together at most 262,144 bytes (larger →
        BatchRequestTooLong), at most 10 entries (more → TooManyEntriesInBatchRequest)
        (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html,
        https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
        """
        queue = self.queue()
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=queue, AttributeNames=["MaximumMessageSize"]
        )["Attributes"]
        self.assertEqual(attributes["MaximumMessageSize"], "262144")
        self.sqs.send_message(QueueUrl=queue, MessageBody="x" * 262_144)
        # 131,073 characters, 262,146 bytes.
        self.refused(
            "InvalidParameterValue", self.sqs.send_message, QueueUrl=queue, MessageBody="é" * 131_073
        )
        # The attribute's name, type and value count: 262,140 + 1 + 6 + 3 bytes.
        self.refused(
            "InvalidParameterValue",
            self.sqs.send_message,
            QueueUrl=queue,
            MessageBody="x" * 262_140,
            MessageAttributes={"a": {"DataType": "String", "StringValue": "xyz"}},
        )
        self.refused(
            "AWS.SimpleQueueService.BatchRequestTooLong",
            self.sqs.send_message_batch,
            QueueUrl=queue,
            Entries=[{"Id": str(i), "MessageBody": "é" * 65_537} for i in range(2)],
        )
        self.refused(
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            self.sqs.send_message_batch,
            QueueUrl=queue,
            Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)],
        )
        self.sqs.send_message_batch(
            QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": "x" * 26_214} for i in range(10)]
        )
        self.assertEqual(len(self.bodies(queue)), 11)


class TransactWriteItemsRules(Stack):
    def test_a_transaction_repeated_with_its_token_is_applied_once(self) -> None:
        """TransactWriteItems, ClientRequestToken: multiple identical calls with one token have the
        effect of one call within the 10 minutes after the first completes
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html);
        the repeat succeeds, applies nothing and streams nothing.
        """
        table, arn = self.table()
        self.db.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "0"}})
        for _ in range(3):
            self.add(table, "a", ClientRequestToken="token-applied-once")
        self.assertEqual(self.counter(table, "a"), 1)
        self.assertEqual([r["eventName"] for r in self.records(arn)], ["INSERT", "MODIFY"])
        # The same items with their members in another order are the same request.
        update = {
            "ExpressionAttributeValues": {":by": {"N": "1"}},
            "ExpressionAttributeNames": {"#n": "n"},
            "UpdateExpression": "ADD #n :by",
            "Key": {"pk": {"S": "a"}},
            "TableName": table,
        }
        self.db.transact_write_items(
            TransactItems=[{"Update": update}], ClientRequestToken="token-applied-once"
        )
        self.assertEqual(self.counter(table, "a"), 1)

    def test_a_transaction_with_binary_values_is_told_apart_by_its_bytes(self) -> None:
        """TransactWriteItems, ClientRequestToken: the request's parameters, binary attribute
        values included, decide whether a repeat is the same request
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
        """
        table, _ = self.table()
        put = lambda blob: {"Put": {"TableName": table, "Item": {"pk": {"S": "bin"}, "b": {"B": blob}}}}
        self.db.transact_write_items(TransactItems=[put(b"\x00first")], ClientRequestToken="token-bytes")
        self.db.transact_write_items(TransactItems=[put(b"\x00first")], ClientRequestToken="token-bytes")
        with self.assertRaises(ClientError) as raised:
            self.db.transact_write_items(TransactItems=[put(b"\x00other")], ClientRequestToken="token-bytes")
        self.assertEqual(raised.exception.response["Error"]["Code"], "IdempotentParameterMismatchException")
        item = self.db.get_item(TableName=table, Key={"pk": {"S": "bin"}}, ConsistentRead=True)["Item"]
        self.assertEqual(item["b"]["B"], b"\x00first")

    def test_another_transaction_with_a_used_token_is_refused_and_applies_nothing(self) -> None:
        """TransactWriteItems, ClientRequestToken: a request with the same token but other
        parameters within the 10-minute window is refused with IdempotentParameterMismatchException
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html),
        whether the token's first request committed or was cancelled.
        """
        table, arn = self.table()
        self.add(table, "a", ClientRequestToken="token-committed")
        records = len(self.records(arn))
        self.refused(
            "IdempotentParameterMismatchException", self.add, table=table, pk="a", by=5,
            ClientRequestToken="token-committed",
        )
        self.refused(
            "IdempotentParameterMismatchException", self.add, table=table, pk="b",
            ClientRequestToken="token-committed",
        )
        condition = {"ConditionExpression": "attribute_exists(pk)"}
        self.refused(
            "TransactionCanceledException", self.add, table=table, pk="c", update=condition,
            ClientRequestToken="token-cancelled",
        )
        self.refused(
            "IdempotentParameterMismatchException", self.add, table=table, pk="c",
            ClientRequestToken="token-cancelled",
        )
        self.assertEqual(self.counter(table, "a"), 1)
        self.assertIsNone(self.counter(table, "b"))
        self.assertIsNone(self.counter(table, "c"))
        self.assertEqual(len(self.records(arn)), records)

    def test_a_cancelled_transaction_repeated_with_its_token_is_evaluated_again(self) -> None:
        """TransactWriteItems, ClientRequestToken: the token makes identical calls one call; a call
        that was cancelled applied nothing, so its repeat is evaluated again, and once that commits
        a further repeat applies nothing
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html;
        https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html).
        """
        table, _ = self.table()
        condition = {"ConditionExpression": "attribute_exists(pk)"}
        self.refused(
            "TransactionCanceledException", self.add, table=table, pk="a", update=condition,
            ClientRequestToken="token-retried",
        )
        self.db.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "10"}})
        self.add(table, "a", update=condition, ClientRequestToken="token-retried")
        self.assertEqual(self.counter(table, "a"), 11)
        self.add(table, "a", update=condition, ClientRequestToken="token-retried")
        self.assertEqual(self.counter(table, "a"), 11)

    def test_a_token_longer_than_36_characters_is_refused(self) -> None:
        """TransactWriteItems, ClientRequestToken: "Length Constraints: Minimum length of 1. Maximum
        length of 36." (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html),
        else ValidationException.
        """
        table, _ = self.table()
        self.refused("ValidationException", self.add, table=table, pk="a", ClientRequestToken="t" * 37)
        self.add(table, "a", ClientRequestToken="t" * 36)
        self.assertEqual(self.counter(table, "a"), 1)

    def test_a_transaction_over_4_mb_is_refused_and_applies_nothing(self) -> None:
        """TransactWriteItems: "The aggregate size of the items in the transaction cannot exceed
        4 MB", else ValidationException
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
        """
        table, arn = self.table()

        def puts(n: int) -> list[dict[str, Any]]:
            value = {"S": "x" * 390_000}
            return [
                {"Put": {"TableName": table, "Item": {"pk": {"S": f"k{i}"}, "v": value}}}
                for i in range(n)
            ]

        self.refused("ValidationException", self.db.transact_write_items, TransactItems=puts(11))
        self.assertEqual(self.items(table), [])
        self.assertEqual(self.records(arn), [])
        self.db.transact_write_items(TransactItems=puts(10))
        self.assertEqual(len(self.items(table)), 10)


class ExpressionRules(Stack):
    def condition(self, size: int) -> str:
        """A condition that holds on an item without `#x`, `size` bytes long (padded with ORs)."""
        clause = "attribute_not_exists(#x)"
        text = clause
        while len(text) + len(" OR " + clause) <= size:
            text += " OR " + clause
        return text + " " * (size - len(text))

    def test_an_expression_over_4_kb_is_refused_and_writes_nothing(self) -> None:
        """Expression parameters: the maximum length of any expression string is 4 KB
        (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html
        #limits-expression-parameters): 4,096 bytes is taken, 4,097 refused, alone and inside a
        transaction, which then applies none of its items.
        """
        table, _ = self.table()
        update = {
            "TableName": table,
            "Key": {"pk": {"S": "a"}},
            "UpdateExpression": "ADD #n :by",
            "ExpressionAttributeNames": {"#n": "n", "#x": "x"},
            "ExpressionAttributeValues": {":by": {"N": "1"}},
        }
        self.db.update_item(**update, ConditionExpression=self.condition(4096))
        with self.assertRaises(ClientError) as refused:
            self.db.update_item(**update, ConditionExpression=self.condition(4097))
        self.assertEqual(refused.exception.response["Error"]["Code"], "ValidationException")
        self.assertIn("Expression size has exceeded", str(refused.exception))
        with self.assertRaises(ClientError) as in_transaction:
            self.db.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}}}},
                    {"Update": {**update, "ConditionExpression": self.condition(4097)}},
                ]
            )
        self.assertIn("Expression size has exceeded", str(in_transaction.exception))
        item = self.db.get_item(TableName=table, Key={"pk": {"S": "a"}}, ConsistentRead=True)
        self.assertEqual(item["Item"]["n"], {"N": "1"})
        absent = self.db.get_item(TableName=table, Key={"pk": {"S": "b"}}, ConsistentRead=True)
        self.assertNotIn("Item", absent)
        # Counted in bytes: 1,366 three-byte characters in a value's name are over 4 KB.
        with self.assertRaises(ClientError) as in_bytes:
            self.db.query(
                TableName=table,
                KeyConditionExpression="pk = :k",
                FilterExpression="#n <> :" + "\u20ac" * 1366,
                ExpressionAttributeNames={"#n": "n"},
                ExpressionAttributeValues={":k": {"S": "a"}},
            )
        self.assertIn("Expression size has exceeded", str(in_bytes.exception))


class TokenWindow(Stack):
    # Not AWS's 10 minutes: the patch reads its window from here, so the test need not wait.
    env = {"MOTO_TOKEN_WINDOW_SECONDS": "1"}

    def test_a_token_is_forgotten_after_its_window(self) -> None:
        """TransactWriteItems, ClientRequestToken: a token is valid for 10 minutes after the first
        request using it completes; after that, a request with it is a new request
        (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
        Here the window is cut to 1 s.
        """
        table, _ = self.table()
        self.add(table, "a", ClientRequestToken="token-window")
        self.add(table, "a", ClientRequestToken="token-window")
        self.assertEqual(self.counter(table, "a"), 1)
        time.sleep(1.2)
        self.add(table, "a", ClientRequestToken="token-window")
        self.assertEqual(self.counter(table, "a"), 2)
        time.sleep(1.2)
        self.add(table, "a", by=5, ClientRequestToken="token-window")
        self.assertEqual(self.counter(table, "a"), 7)


class GlobalIndexBackfill(Stack):
    # Not AWS's minutes: the patch reads its backfill time from here, so the test need not wait.
    env = {"MOTO_BACKFILL_SECONDS": "1"}

    def test_an_index_added_by_update_table_cannot_be_read_while_it_backfills(self) -> None:
        """UpdateTable, GlobalSecondaryIndexUpdates Create: the new index is CREATING, with
        Backfilling true, while DynamoDB copies the table's items into it, and a Query of it is
        refused, "Cannot read from backfilling global secondary index" (developer guide,
        "Adding a global secondary index to an existing table",
        https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.OnlineOps.html).
        Here the backfill is cut to 1 s; indexes made with their table are ACTIVE at once.
        """
        table, _ = self.table()
        self.db.put_item(TableName=table, Item={"pk": {"S": "a"}, "g": {"S": "x"}})
        self.db.update_table(
            TableName=table,
            AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "S"}],
            GlobalSecondaryIndexUpdates=[
                {
                    "Create": {
                        "IndexName": "by_g",
                        "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "KEYS_ONLY"},
                    }
                }
            ],
        )

        def index() -> dict[str, Any]:
            described = self.db.describe_table(TableName=table)["Table"]
            return next(i for i in described["GlobalSecondaryIndexes"] if i["IndexName"] == "by_g")

        def query() -> dict[str, Any]:
            return self.db.query(
                TableName=table,
                IndexName="by_g",
                KeyConditionExpression="g = :g",
                ExpressionAttributeValues={":g": {"S": "x"}},
            )

        self.assertEqual((index()["IndexStatus"], index().get("Backfilling")), ("CREATING", True))
        error = self.refused("ValidationException", query)
        self.assertIn("Cannot read from backfilling global secondary index: by_g", str(error))
        time.sleep(1.2)
        self.assertEqual(index()["IndexStatus"], "ACTIVE")
        self.assertNotIn("Backfilling", index())
        self.assertEqual(query()["Count"], 1)


class SecretsManagerRules(Stack):
    """What Countersign's secret reads depend on (config/secrets.rs): one BatchGetSecretValue
    of at most 20 ids, each failed secret named in Errors, values of at most 65,536 characters."""

    def setUp(self) -> None:
        self.sm = self.moto.client("secretsmanager")

    def test_a_secret_string_is_at_most_65536_characters(self) -> None:
        """CreateSecret, PutSecretValue, UpdateSecret: SecretString "Length Constraints: Maximum
        length of 65536"
        (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html)."""
        name = self.name("secret")
        self.refused("ValidationException", self.sm.create_secret, Name=name, SecretString="x" * 65537)
        self.sm.create_secret(Name=name, SecretString="x" * 65536)
        self.refused("ValidationException", self.sm.put_secret_value, SecretId=name, SecretString="y" * 65537)
        self.refused("ValidationException", self.sm.update_secret, SecretId=name, SecretString="y" * 65537)
        self.assertEqual(self.sm.get_secret_value(SecretId=name)["SecretString"], "x" * 65536)

    def test_a_batch_get_takes_at_most_20_ids(self) -> None:
        """BatchGetSecretValue: SecretIdList "Array Members: Minimum number of 1 item. Maximum
        number of 20 items"
        (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_BatchGetSecretValue.html)."""
        names = [self.name("batch") for _ in range(21)]
        for name in names:
            self.sm.create_secret(Name=name, SecretString=name)
        self.refused("ValidationException", self.sm.batch_get_secret_value, SecretIdList=names)
        got = self.sm.batch_get_secret_value(SecretIdList=names[:20])
        self.assertEqual(sorted(v["SecretString"] for v in got["SecretValues"]), sorted(names[:20]))

    def test_an_unknown_or_deleted_secret_is_an_error_of_its_own(self) -> None:
        """BatchGetSecretValue: "Errors: A list of errors Secrets Manager encountered while
        attempting to retrieve individual secrets" — the others are still returned; a secret
        scheduled for deletion cannot be read (GetSecretValue: InvalidRequestException)."""
        kept, deleted = self.name("kept"), self.name("deleted")
        self.sm.create_secret(Name=kept, SecretString="k")
        self.sm.create_secret(Name=deleted, SecretString="d")
        self.sm.delete_secret(SecretId=deleted)
        got = self.sm.batch_get_secret_value(SecretIdList=[kept, deleted, "never-created"])
        self.assertEqual([v["Name"] for v in got["SecretValues"]], [kept])
        codes = {e["SecretId"]: e["ErrorCode"] for e in got["Errors"]}
        self.assertEqual(
            codes, {deleted: "InvalidRequestException", "never-created": "ResourceNotFoundException"}
        )


if __name__ == "__main__":
    unittest.main()

"""IAM in the local stack (infra/local_iam): what AWS's policy evaluation allows, tested with the
IAM User Guide's and the DynamoDB Developer Guide's own examples, then the gate over the wire:
each function's role from infra/template.yaml, refused with AccessDeniedException where AWS
refuses.

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

import json
import os
import tempfile
import unittest
from typing import Any

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from moto_process import INFRA, MotoServer  # noqa: F401 - puts infra/ on sys.path

from local_iam.policy import Resource, Statement, evaluate
from local_iam.requests import dynamodb as dynamodb_needs
from local_iam.template import Resolver, all_grants, load

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table"


def register(endpoint: str, name: str, variables: dict[str, str], parameters: dict[str, str],
             without: list[list[str]] | None = None) -> dict[str, Any]:
    """Registers a stack with the gate: each function's credentials."""
    import urllib.request

    payload = {"name": name, "variables": variables, "parameters": parameters, "without": without or []}
    request = urllib.request.Request(
        f"{endpoint}/_countersign/iam/stacks",
        data=json.dumps(payload).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)["functions"]


def allow(actions: list[str], resources: list[str], condition: dict[str, Any] | None = None) -> Statement:
    return Statement.make("Allow", actions, [Resource(r, r) for r in resources], condition)


def allowed(statements: list[Statement], action: str, arn: str, context: dict[str, list[str]] | None = None) -> bool:
    return evaluate(statements, action, arn, context or {}) is not None


class PolicyEvaluation(unittest.TestCase):
    """"Policy evaluation logic" and "IAM JSON policy elements" (IAM User Guide)."""

    def test_nothing_is_allowed_that_no_statement_allows(self) -> None:
        """Deny by default: "By default, all requests are implicitly denied"."""
        self.assertFalse(allowed([], "dynamodb:GetItem", f"{ARN}/Books"))
        self.assertFalse(allowed([allow(["dynamodb:PutItem"], [f"{ARN}/Books"])], "dynamodb:GetItem", f"{ARN}/Books"))

    def test_an_explicit_deny_overrides_an_allow(self) -> None:
        """"An explicit deny in any policy overrides any allows"."""
        deny = Statement.make("Deny", ["dynamodb:*"], [Resource(f"{ARN}/Books", "Books")])
        self.assertTrue(allowed([allow(["dynamodb:GetItem"], ["*"])], "dynamodb:GetItem", f"{ARN}/Books"))
        self.assertFalse(allowed([allow(["dynamodb:GetItem"], ["*"]), deny], "dynamodb:GetItem", f"{ARN}/Books"))

    def test_actions_match_without_regard_to_case_and_take_wildcards(self) -> None:
        """Action: "The prefix and the action name are case insensitive"; `*` and `?` match."""
        statements = [allow(["DynamoDB:getitem"], ["*"])]
        self.assertTrue(allowed(statements, "dynamodb:GetItem", f"{ARN}/Books"))
        self.assertTrue(allowed([allow(["dynamodb:Get*"], ["*"])], "dynamodb:GetRecords", "x"))
        self.assertTrue(allowed([allow(["sqs:?eceiveMessage"], ["*"])], "sqs:ReceiveMessage", "x"))
        self.assertFalse(allowed([allow(["dynamodb:Get*"], ["*"])], "dynamodb:PutItem", "x"))

    def test_a_table_grant_does_not_reach_its_index(self) -> None:
        """An index is its own resource, `table/NAME/index/INDEX` (DynamoDB's resource types in
        the Service Authorization Reference): the table's ARN alone does not match it."""
        statements = [allow(["dynamodb:Query"], [f"{ARN}/Events"])]
        self.assertTrue(allowed(statements, "dynamodb:Query", f"{ARN}/Events"))
        self.assertFalse(allowed(statements, "dynamodb:Query", f"{ARN}/Events/index/by_order"))
        by_index = [allow(["dynamodb:Query"], [f"{ARN}/Events/index/by_order"])]
        self.assertFalse(allowed(by_index, "dynamodb:Query", f"{ARN}/Events"))

    def test_resource_arns_match_with_regard_to_case(self) -> None:
        """"In the Resource element, the IAM user name is case sensitive" (and so is an ARN)."""
        statements = [allow(["iam:GetUser"], ["arn:aws:iam::123456789012:user/Bob"])]
        self.assertTrue(allowed(statements, "iam:GetUser", "arn:aws:iam::123456789012:user/Bob"))
        self.assertFalse(allowed(statements, "iam:GetUser", "arn:aws:iam::123456789012:user/bob"))

    def test_a_star_stands_for_any_run_inside_a_segment_slashes_included(self) -> None:
        """"Using wildcards in resource ARNs": `user/accounting/*` is every user on that path, and
        `*` replaces everything in a segment, `/` included."""
        path = [allow(["iam:GetUser"], ["arn:aws:iam::123456789012:user/accounting/*"])]
        self.assertTrue(allowed(path, "iam:GetUser", "arn:aws:iam::123456789012:user/accounting/bob"))
        self.assertTrue(allowed(path, "iam:GetUser", "arn:aws:iam::123456789012:user/accounting/east/bob"))
        self.assertFalse(allowed(path, "iam:GetUser", "arn:aws:iam::123456789012:user/marketing/bob"))
        bucket = [allow(["s3:GetObject"], ["arn:aws:s3:::amzn-s3-demo-bucket/*"])]
        self.assertTrue(allowed(bucket, "s3:GetObject", "arn:aws:s3:::amzn-s3-demo-bucket/a/b/c.txt"))

    def test_a_star_crosses_colons_only_as_the_last_character_of_its_segment(self) -> None:
        """"If the `*` wildcard is the last character of a resource ARN segment, it can expand to
        match beyond the colon boundaries"; inside a segment it stays there."""
        last = [allow(["dynamodb:GetItem"], ["arn:aws:dynamodb:*:123456789012:table/Books"])]
        self.assertTrue(allowed(last, "dynamodb:GetItem", f"{ARN}/Books"))
        inside = [allow(["sqs:SendMessage"], ["arn:aws:sqs:us-east-1:123456789012:jobs*dlq"])]
        self.assertTrue(allowed(inside, "sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:jobs-x-dlq"))
        self.assertFalse(allowed(inside, "sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:jobs:x:dlq"))

    def test_a_question_mark_stands_for_one_character(self) -> None:
        statements = [allow(["dynamodb:GetItem"], [f"{ARN}/Book?"])]
        self.assertTrue(allowed(statements, "dynamodb:GetItem", f"{ARN}/Books"))
        self.assertFalse(allowed(statements, "dynamodb:GetItem", f"{ARN}/Book"))
        self.assertFalse(allowed(statements, "dynamodb:GetItem", f"{ARN}/Bookss"))


class Conditions(unittest.TestCase):
    """Condition operators and multivalued keys (IAM User Guide), and the DynamoDB Developer
    Guide's fine-grained access control examples."""

    # "2: Grant permissions that limit access to specific attributes in a table".
    SPECIFIC_ATTRIBUTES = {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["UserId", "TopScore"]},
        "StringEqualsIfExists": {
            "dynamodb:Select": "SPECIFIC_ATTRIBUTES",
            "dynamodb:ReturnValues": ["NONE", "UPDATED_OLD", "UPDATED_NEW"],
        },
    }

    def update(self, expression: str, names: dict[str, str], return_values: str | None = None) -> dict[str, list[str]]:
        body: dict[str, Any] = {
            "TableName": "GameScores",
            "Key": {"UserId": {"S": "u"}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
        }
        if return_values:
            body["ReturnValues"] = return_values
        (need,) = dynamodb_needs("UpdateItem", body, "us-west-2", "123456789012")
        return need.context

    def test_an_update_of_listed_attributes_only_is_allowed(self) -> None:
        statements = [allow(["dynamodb:UpdateItem"], ["arn:aws:dynamodb:us-west-2:123456789012:table/GameScores"], self.SPECIFIC_ATTRIBUTES)]
        arn = "arn:aws:dynamodb:us-west-2:123456789012:table/GameScores"
        self.assertTrue(allowed(statements, "dynamodb:UpdateItem", arn, self.update("SET #t = :t", {"#t": "TopScore"})))
        # Another attribute written, or read back whole: refused.
        self.assertFalse(allowed(statements, "dynamodb:UpdateItem", arn, self.update("SET #t = :t, Wins = :w", {"#t": "TopScore"})))
        self.assertFalse(allowed(statements, "dynamodb:UpdateItem", arn, self.update("SET #t = :t", {"#t": "TopScore"}, "ALL_NEW")))
        self.assertTrue(allowed(statements, "dynamodb:UpdateItem", arn, self.update("SET #t = :t", {"#t": "TopScore"}, "UPDATED_NEW")))

    def test_a_condition_on_an_unlisted_attribute_is_refused(self) -> None:
        """"it cannot perform conditional write operations based on any other attributes"."""
        arn = "arn:aws:dynamodb:us-west-2:123456789012:table/GameScores"
        statements = [allow(["dynamodb:UpdateItem"], [arn], self.SPECIFIC_ATTRIBUTES)]
        context = dynamodb_needs("UpdateItem", {
            "TableName": "GameScores", "Key": {"UserId": {"S": "u"}},
            "UpdateExpression": "SET TopScore = :t", "ConditionExpression": "attribute_not_exists(Banned)",
        }, "us-west-2", "123456789012")[0].context
        self.assertFalse(allowed(statements, "dynamodb:UpdateItem", arn, context))

    def test_for_all_values_holds_for_an_empty_set_and_for_any_value_does_not(self) -> None:
        """"ForAllValues ... also returns true if there are no context keys in the request"; with
        ForAnyValue "if there are no keys ... the condition returns false"."""
        every = [allow(["x:Y"], ["*"], {"ForAllValues:StringEquals": {"k:Set": ["a"]}})]
        self.assertTrue(allowed(every, "x:Y", "r", {}))
        self.assertTrue(allowed(every, "x:Y", "r", {"k:set": []}))
        self.assertFalse(allowed(every, "x:Y", "r", {"k:set": ["a", "b"]}))
        some = [allow(["x:Y"], ["*"], {"ForAnyValue:StringEquals": {"k:Set": ["a"]}})]
        self.assertFalse(allowed(some, "x:Y", "r", {}))
        self.assertTrue(allowed(some, "x:Y", "r", {"k:set": ["b", "a"]}))

    def test_a_missing_key_fails_a_positive_operator_and_passes_a_negated_or_if_exists(self) -> None:
        """"If the key ... is not present in the request context, the values do not match";
        a negated operator (StringNotLike) is then true; `...IfExists` is true when it is absent."""
        positive = [allow(["x:Y"], ["*"], {"StringEquals": {"k:One": "a"}})]
        negated = [allow(["x:Y"], ["*"], {"StringNotLike": {"k:One": "a*"}})]
        if_exists = [allow(["x:Y"], ["*"], {"StringEqualsIfExists": {"k:One": "a"}})]
        self.assertFalse(allowed(positive, "x:Y", "r"))
        self.assertTrue(allowed(negated, "x:Y", "r"))
        self.assertTrue(allowed(if_exists, "x:Y", "r"))
        self.assertFalse(allowed(if_exists, "x:Y", "r", {"k:one": ["b"]}))
        self.assertFalse(allowed(negated, "x:Y", "r", {"k:one": ["abc"]}))

    def test_condition_keys_are_not_case_sensitive(self) -> None:
        statements = [allow(["x:Y"], ["*"], {"StringEquals": {"DynamoDB:ReturnValues": "NONE"}})]
        self.assertTrue(allowed(statements, "x:Y", "r", {"dynamodb:returnvalues": ["NONE"]}))

    def test_expression_names_are_read_as_the_top_level_attributes(self) -> None:
        (need,) = dynamodb_needs("UpdateItem", {
            "TableName": "T", "Key": {"pk": {"S": "k"}},
            "UpdateExpression": "SET #a.#b = :v, c[0] = :w REMOVE d ADD e :n",
            "ConditionExpression": "attribute_exists(#pk) AND (size(f) > :z OR begins_with(g, :p))",
            "ExpressionAttributeNames": {"#a": "a", "#b": "b", "#pk": "pk"},
        }, "us-east-1", "123456789012")
        self.assertEqual(need.context["dynamodb:attributes"], ["a", "c", "d", "e", "f", "g", "pk"])
        # No ReturnValues in the request, none in its context (review of v6, finding 5).
        self.assertNotIn("dynamodb:returnvalues", need.context)

    def test_a_string_equals_on_return_values_refuses_a_request_that_leaves_it_out(self) -> None:
        """AWS puts a condition key in the request context only when the request carries it
        ("IAM JSON policy elements: Condition operators": a key that is not present does not
        match), which is why the DynamoDB Developer Guide's examples write
        `StringEqualsIfExists` for dynamodb:ReturnValues (review of v6, finding 5)."""
        arn = "arn:aws:dynamodb:us-west-2:123456789012:table/GameScores"
        strict = [allow(["dynamodb:UpdateItem"], [arn], {"StringEquals": {"dynamodb:ReturnValues": ["NONE"]}})]
        lenient = [allow(["dynamodb:UpdateItem"], [arn], {"StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE"]}})]
        absent = self.update("SET TopScore = :t", {})
        named = self.update("SET TopScore = :t", {}, "NONE")
        self.assertFalse(allowed(strict, "dynamodb:UpdateItem", arn, absent))
        self.assertTrue(allowed(strict, "dynamodb:UpdateItem", arn, named))
        self.assertTrue(allowed(lenient, "dynamodb:UpdateItem", arn, absent))
        self.assertTrue(allowed(lenient, "dynamodb:UpdateItem", arn, named))
        self.assertFalse(allowed(lenient, "dynamodb:UpdateItem", arn, self.update("SET TopScore = :t", {}, "ALL_NEW")))

    def test_leading_keys_are_the_partition_key_s_value(self) -> None:
        """"1: Grant permissions that limit access to items with a specific partition key
        value" (dynamodb:LeadingKeys): a put or delete of another key is refused."""
        arn = "arn:aws:dynamodb:us-east-1:123456789012:table/T"
        statements = [allow(["dynamodb:PutItem", "dynamodb:DeleteItem"], [arn],
                            {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["delegation#*"]}})]
        for operation, field in (("PutItem", "Item"), ("DeleteItem", "Key")):
            for key, expected in (("delegation#acme#alice", True), ("ABCDEFGHIJKLMNOP", False)):
                (need,) = dynamodb_needs(operation, {"TableName": "T", field: {"pk": {"S": key}}}, "us-east-1", "123456789012")
                self.assertEqual(need.context["dynamodb:leadingkeys"], [key])
                self.assertEqual(allowed(statements, f"dynamodb:{operation}", arn, need.context), expected, (operation, key))

    def test_a_batch_get_s_leading_keys_are_every_key_s(self) -> None:
        """"ForAllValues:StringLike" on dynamodb:LeadingKeys holds for a BatchGetItem only when
        every key it reads matches: one key outside the prefix refuses the whole batch."""
        arn = "arn:aws:dynamodb:us-east-1:123456789012:table/T"
        statements = [allow(["dynamodb:BatchGetItem"], [arn],
                            {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["delegation#*"]}})]
        for keys, expected in ((["delegation#acme#alice", "delegation#acme#bob"], True),
                               (["delegation#acme#alice", "ABCDEFGHIJKLMNOP"], False)):
            (need,) = dynamodb_needs("BatchGetItem", {"RequestItems": {"T": {
                "Keys": [{"pk": {"S": key}} for key in keys], "ConsistentRead": True}}},
                "us-east-1", "123456789012")
            self.assertEqual(need.context["dynamodb:leadingkeys"], keys)
            self.assertEqual(allowed(statements, "dynamodb:BatchGetItem", arn, need.context), expected, keys)


    def test_a_query_s_and_a_batch_write_s_leading_keys_are_their_partition_keys(self) -> None:
        """dynamodb:LeadingKeys on Query (the partition key its key condition names) and on
        BatchWriteItem (every key it puts or deletes), as the Developer Guide's "Using IAM
        policy conditions for fine-grained access control" lists the key for both (review of
        v6, finding 10)."""
        arn = "arn:aws:dynamodb:us-east-1:123456789012:table/T"
        (query,) = dynamodb_needs("Query", {
            "TableName": "T", "KeyConditionExpression": "#pk = :p AND begins_with(#sk, :s)",
            "ExpressionAttributeNames": {"#pk": "pk", "#sk": "sk"},
            "ExpressionAttributeValues": {":p": {"S": "delegation#acme#alice"}, ":s": {"S": "x"}},
        }, "us-east-1", "123456789012")
        self.assertEqual(query.context["dynamodb:leadingkeys"], ["delegation#acme#alice"])
        statements = [allow(["dynamodb:Query", "dynamodb:BatchWriteItem"], [arn],
                            {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["delegation#*"]}})]
        self.assertTrue(allowed(statements, "dynamodb:Query", arn, query.context))
        (batch,) = dynamodb_needs("BatchWriteItem", {"RequestItems": {"T": [
            {"PutRequest": {"Item": {"pk": {"S": "delegation#acme#bob"}, "x": {"S": "1"}}}},
            {"DeleteRequest": {"Key": {"pk": {"S": "ABCDEFGHIJKLMNOP"}}}},
        ]}}, "us-east-1", "123456789012")
        self.assertEqual(batch.context["dynamodb:leadingkeys"], ["delegation#acme#bob", "ABCDEFGHIJKLMNOP"])
        self.assertFalse(allowed(statements, "dynamodb:BatchWriteItem", arn, batch.context))


class TemplateRoles(unittest.TestCase):
    """The roles of infra/template.yaml, resolved as CloudFormation resolves them."""

    def roles(self, parameters: dict[str, str]) -> Any:
        variables = {"APPROVALS_TABLE": "a", "KEYS_TABLE": "k", "API_KEYS_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys-AbCdEf"}
        return Resolver(load(), variables, parameters, "us-east-1", "123456789012", lambda t: None).roles()

    def test_an_if_grant_follows_its_parameter(self) -> None:
        """The read role reads the API keys' secret only when the stack has one (HasApiKeys)."""
        secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys-AbCdEf"
        without = self.roles({})["read"]
        with_keys = self.roles({"ApiKeys": "(set)"})["read"]
        self.assertFalse(allowed(list(without.statements), "secretsmanager:GetSecretValue", secret))
        self.assertTrue(allowed(list(with_keys.statements), "secretsmanager:GetSecretValue", secret))

    def test_a_comma_delimited_list_s_members_are_trimmed(self) -> None:
        """CloudFormation's CommaDelimitedList: "each member string is space trimmed" (User
        Guide, "Parameters"), so `a, b` grants b as CloudFormation would (review of v6,
        finding 10)."""
        function = "arn:aws:lambda:us-east-1:123456789012:function:second"
        roles = self.roles({"ResumeFunctionArns": "arn:aws:lambda:us-east-1:123456789012:function:first, " + function})
        execution = f"{function}:$LATEST/durable-execution/run/1"
        self.assertTrue(allowed(list(roles["executor"].statements), "lambda:SendDurableExecutionCallbackSuccess", execution))

    def test_every_grant_is_named_as_the_template_writes_it(self) -> None:
        grants = all_grants(load())
        self.assertIn(("ReadRole", "secretsmanager:GetSecretValue", "ApiKeysSecret"), grants)
        self.assertIn(("SweeperRole", "dynamodb:Query", "${ApprovalsTable.Arn}/index/due"), grants)


class OverTheWire(unittest.TestCase):
    """The gate in front of moto: a stack registered, each function calling as its role."""

    usage = tempfile.mkdtemp(prefix="iam-usage-")

    @classmethod
    def setUpClass(cls) -> None:
        cls.moto = MotoServer({"MOTO_IAM_USAGE": cls.usage})
        admin = cls.moto.client
        cls.db, cls.sqs, cls.sm = admin("dynamodb"), admin("sqs"), admin("secretsmanager")
        names = {v: f"wire-{v.lower()}" for v in ("APPROVALS_TABLE", "EVENTS_TABLE", "LEDGER_TABLE", "IDEMPOTENCY_TABLE", "KEYS_TABLE")}
        for variable, name in names.items():
            cls.table(name, events=variable == "EVENTS_TABLE")
        cls.queue = cls.sqs.create_queue(QueueName="wire-jobs")["QueueUrl"]
        cls.secrets = {
            v: cls.sm.create_secret(Name=f"wire/{v.lower()}", SecretString="{}")["ARN"]
            for v in ("SLACK", "DECISION_TOKEN_SECRET", "API_KEYS")
        }
        cls.variables = {
            **names,
            "JOBS_QUEUE_URL": cls.queue,
            **{f"{v}_SECRET_ARN": arn for v, arn in cls.secrets.items()},
        }
        cls.names = names
        cls.roles = cls.register("wire", {})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.moto.stop()

    @classmethod
    def table(cls, name: str, events: bool = False) -> None:
        attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
        schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
        extra: dict[str, Any] = {}
        if events:
            attributes += [{"AttributeName": "id", "AttributeType": "S"}, {"AttributeName": "trail_order", "AttributeType": "S"}]
            schema.append({"AttributeName": "id", "KeyType": "RANGE"})
            extra["LocalSecondaryIndexes"] = [{
                "IndexName": "by_order",
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "trail_order", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }]
        cls.db.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=attributes, KeySchema=schema, **extra)

    @classmethod
    def register(cls, name: str, parameters: dict[str, str], without: list[list[str]] | None = None) -> dict[str, Any]:
        return register(cls.moto.endpoint, name, cls.variables, parameters, without)

    def client(self, service: str, function: str, roles: dict[str, Any] | None = None) -> Any:
        role = (roles or self.roles)[function]
        return boto3.client(
            service,
            endpoint_url=self.moto.endpoint,
            region_name="us-east-1",
            aws_access_key_id=role["access_key_id"],
            aws_secret_access_key=role["secret_access_key"],
            aws_session_token=role["session_token"],
            config=Config(retries={"max_attempts": 1}),
        )

    def denied(self, call: Any, **kwargs: Any) -> ClientError:
        with self.assertRaises(ClientError) as raised:
            call(**kwargs)
        self.assertIn(raised.exception.response["Error"]["Code"], ("AccessDeniedException", "AccessDenied"), raised.exception)
        return raised.exception

    def test_a_table_and_its_index_are_granted_apart(self) -> None:
        """The API function may query the events table (the trail) and its by_order index, and
        no index it was not granted."""
        api = self.client("dynamodb", "api")
        key = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "x"}}}
        api.query(TableName=self.names["EVENTS_TABLE"], **key)
        api.query(TableName=self.names["EVENTS_TABLE"], IndexName="by_order", **key)
        error = self.denied(api.query, TableName=self.names["LEDGER_TABLE"], **key)
        self.assertIn("dynamodb:Query on resource: arn:aws:dynamodb:us-east-1:123456789012:table/wire-ledger_table", str(error))
        self.assertIn("assumed-role/wire-CreateRole/api", str(error))

    def test_every_table_of_a_transaction_is_checked_and_a_refused_one_writes_nothing(self) -> None:
        executor = self.client("dynamodb", "executor")
        ledger = {"Update": {"TableName": self.names["LEDGER_TABLE"], "Key": {"pk": {"S": "l"}},
                             "UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": "1"}}}}
        event = {"Put": {"TableName": self.names["EVENTS_TABLE"], "Item": {"pk": {"S": "e"}, "id": {"S": "1"}}}}
        executor.transact_write_items(TransactItems=[ledger, event])
        other = {"Put": {"TableName": self.names["IDEMPOTENCY_TABLE"], "Item": {"pk": {"S": "i"}}}}
        ledger["Update"]["Key"] = {"pk": {"S": "l2"}}
        error = self.denied(executor.transact_write_items, TransactItems=[ledger, other])
        self.assertIn("dynamodb:PutItem", str(error))
        self.assertNotIn("Item", self.db.get_item(TableName=self.names["LEDGER_TABLE"], Key={"pk": {"S": "l2"}}))

    def test_a_function_reads_its_own_secrets_and_not_another_functions(self) -> None:
        """BatchGetSecretValue: each secret needs GetSecretValue; one refused comes back in Errors."""
        webhook = self.client("secretsmanager", "webhook")
        webhook.get_secret_value(SecretId=self.secrets["SLACK"])
        self.denied(webhook.get_secret_value, SecretId=self.secrets["DECISION_TOKEN_SECRET"])
        batch = webhook.batch_get_secret_value(SecretIdList=[self.secrets["SLACK"], self.secrets["DECISION_TOKEN_SECRET"]])
        self.assertEqual([v["ARN"] for v in batch["SecretValues"]], [self.secrets["SLACK"]])
        self.assertEqual([(e["SecretId"], e["ErrorCode"]) for e in batch["Errors"]],
                         [(self.secrets["DECISION_TOKEN_SECRET"], "AccessDeniedException")])

    def test_a_queue_is_granted_per_action(self) -> None:
        self.client("sqs", "executor").receive_message(QueueUrl=self.queue)
        self.client("sqs", "dispatch").send_message(QueueUrl=self.queue, MessageBody="job")
        self.denied(self.client("sqs", "webhook").send_message, QueueUrl=self.queue, MessageBody="job")
        self.denied(self.client("sqs", "dispatch").receive_message, QueueUrl=self.queue)

    def test_an_if_grant_follows_the_deployed_parameter(self) -> None:
        """The read function's role reads the API keys' secret only when ApiKeys is set."""
        without = self.register("wire-no-keys", {})
        with_keys = self.register("wire-keys", {"ApiKeys": "(set)"})
        self.denied(self.client("secretsmanager", "read", without).get_secret_value, SecretId=self.secrets["API_KEYS"])
        self.client("secretsmanager", "read", with_keys).get_secret_value(SecretId=self.secrets["API_KEYS"])

    def test_a_key_item_is_updated_only_in_its_last_used_at(self) -> None:
        """The API, read and decide roles may write `last_used_at` of a key and nothing else: a
        compromised function cannot un-revoke a key or change its roles."""
        keys = self.names["KEYS_TABLE"]
        self.db.put_item(TableName=keys, Item={"pk": {"S": "key"}, "roles": {"SS": ["reader"]}, "revoked_at": {"N": "1"}})
        for function in ("api", "read", "decide"):
            db = self.client("dynamodb", function)
            db.update_item(TableName=keys, Key={"pk": {"S": "key"}}, UpdateExpression="SET #u = :t",
                           ConditionExpression="attribute_exists(#pk) AND (attribute_not_exists(#u) OR #u <= :h)",
                           ExpressionAttributeNames={"#u": "last_used_at", "#pk": "pk"},
                           ExpressionAttributeValues={":t": {"N": "5"}, ":h": {"N": "5"}})
            self.denied(db.update_item, TableName=keys, Key={"pk": {"S": "key"}}, UpdateExpression="REMOVE revoked_at")
            self.denied(db.update_item, TableName=keys, Key={"pk": {"S": "key"}}, UpdateExpression="ADD #r :r",
                        ExpressionAttributeNames={"#r": "roles"}, ExpressionAttributeValues={":r": {"SS": ["operator"]}})
            self.denied(db.update_item, TableName=keys, Key={"pk": {"S": "key"}}, UpdateExpression="SET #u = :t",
                        ExpressionAttributeNames={"#u": "last_used_at"}, ExpressionAttributeValues={":t": {"N": "6"}},
                        ReturnValues="ALL_NEW")
        item = self.db.get_item(TableName=keys, Key={"pk": {"S": "key"}})["Item"]
        self.assertEqual(item["revoked_at"], {"N": "1"})
        self.assertEqual(item["roles"], {"SS": ["reader"]})

    def test_a_withheld_grant_is_refused_and_the_statements_other_grants_kept(self) -> None:
        """A stack registered without one grant (one action on one resource, as the template
        writes them): that call is refused, the same statement's other resources still allowed,
        and the refusal recorded as one a test asked for."""
        roles = self.register("wire-without", {}, [["CreateRole", "dynamodb:Query", "EventsTable.Arn"]])
        api = self.client("dynamodb", "api", roles)
        key = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "x"}}}
        self.denied(api.query, TableName=self.names["EVENTS_TABLE"], **key)
        api.query(TableName=self.names["EVENTS_TABLE"], IndexName="by_order", **key)
        api.get_item(TableName=self.names["APPROVALS_TABLE"], Key={"pk": {"S": "x"}})
        records = []
        for name in os.listdir(self.usage):
            with open(os.path.join(self.usage, name), encoding="utf-8") as f:
                records += [json.loads(line) for line in f]
        self.assertTrue(any(r.get("refused") and r["stack"] == "wire-without" and r["withholding"] for r in records))

    def test_an_unknown_key_is_unrecognized_and_the_administrator_may_do_anything(self) -> None:
        stranger = boto3.client("dynamodb", endpoint_url=self.moto.endpoint, region_name="us-east-1",
                                aws_access_key_id="ASIANOBODY", aws_secret_access_key="x", aws_session_token="y",
                                config=Config(retries={"max_attempts": 1}))
        with self.assertRaises(ClientError) as raised:
            stranger.list_tables()
        self.assertEqual(raised.exception.response["Error"]["Code"], "UnrecognizedClientException")
        self.db.list_tables()

    def test_an_unsigned_request_is_refused_as_aws_refuses_it(self) -> None:
        """A request with no Authorization at all is never the administrator's: AWS refuses it
        before anything else (MissingAuthenticationTokenException; review of v6, finding 10)."""
        unsigned = boto3.client("dynamodb", endpoint_url=self.moto.endpoint, region_name="us-east-1",
                                config=Config(signature_version=UNSIGNED, retries={"max_attempts": 1}))
        with self.assertRaises(ClientError) as raised:
            unsigned.get_item(TableName=self.names["APPROVALS_TABLE"], Key={"pk": {"S": "x"}})
        self.assertEqual(raised.exception.response["Error"]["Code"], "MissingAuthenticationTokenException")
        sqs = boto3.client("sqs", endpoint_url=self.moto.endpoint, region_name="us-east-1",
                           config=Config(signature_version=UNSIGNED, retries={"max_attempts": 1}))
        with self.assertRaises(ClientError) as raised:
            sqs.send_message(QueueUrl=self.queue, MessageBody="job")
        self.assertIn("MissingAuthenticationToken", raised.exception.response["Error"]["Code"])

    def test_the_calls_are_recorded_for_the_coverage_check(self) -> None:
        api = self.client("dynamodb", "api")
        api.get_item(TableName=self.names["APPROVALS_TABLE"], Key={"pk": {"S": "x"}})
        self.denied(api.get_item, TableName=self.names["LEDGER_TABLE"], Key={"pk": {"S": "x"}})
        lines = []
        for name in os.listdir(self.usage):
            with open(os.path.join(self.usage, name), encoding="utf-8") as f:
                lines += [json.loads(line) for line in f]
        self.assertIn({"role": "CreateRole", "action": "dynamodb:GetItem", "resource": "ApprovalsTable.Arn"}, lines)
        self.assertTrue(any(r.get("refused") and r["function"] == "api" and r["action"] == "dynamodb:GetItem" for r in lines))


class SwitchedOff(unittest.TestCase):
    def test_moto_iam_off_lets_a_refused_call_through(self) -> None:
        """MOTO_IAM=off: for one debugging run, never in `make test`."""
        moto = MotoServer({"MOTO_IAM": "off"})
        try:
            admin = moto.client("dynamodb")
            admin.create_table(TableName="off-ledger", BillingMode="PAY_PER_REQUEST",
                               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                               KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
            roles = register(moto.endpoint, "off", {"LEDGER_TABLE": "off-ledger"}, {})
            role = roles["api"]
            api = boto3.client("dynamodb", endpoint_url=moto.endpoint, region_name="us-east-1",
                               aws_access_key_id=role["access_key_id"], aws_secret_access_key=role["secret_access_key"],
                               aws_session_token=role["session_token"])
            api.get_item(TableName="off-ledger", Key={"pk": {"S": "x"}})
        finally:
            moto.stop()


if __name__ == "__main__":
    unittest.main()

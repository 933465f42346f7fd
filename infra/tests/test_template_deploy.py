"""A deploy on a new account, checked offline against infra/template.yaml as CloudFormation
resolves it: only the minimum parameters given, every other one at its default.

- The parameters without a default are exactly the minimum (DecisionTokenSecret,
  ActionTargets): NotifierUrl, WebhookSources and Oidc are optional.
- Conditions are evaluated as CloudFormation does, a CommaDelimitedList parameter being a list
  (`!Join ["", !Ref ResumeStateMachineArns]` is empty when none is given).
- Every default passes its own parameter's constraints (CloudFormation checks a default as it
  checks a given value: AllowedPattern must match the whole value, MinLength, MaxLength,
  AllowedValues, MinValue, MaxValue).
- With the minimum, every reference (Ref, GetAtt, Sub, DependsOn) of every resource created
  names a parameter, a pseudo parameter or a resource that is created too: a resource under a
  false condition (NotifierUrlSecret without NotifierUrl) is only named under that condition.
- Nothing by default needs more than a new account has: no reserved concurrency.
- Oidc's secret (its client secrets) exists only with Oidc given, and only the decide function
  names it (OIDC_SECRET_ARN) and may read it.

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

import re
import unittest
from typing import Any

from moto_process import INFRA  # noqa: F401 - puts infra/ on sys.path

from local_iam.template import load

MINIMUM = {
    "DecisionTokenSecret": "k" * 32,
    "ActionTargets": '{"deploy": {"url": "https://deploy.example.com/hook"}}',
}
OIDC = ('{"acme": {"issuer": "https://idp.example.com", "client_id": "countersign", '
        '"client_secret": "s3cret"}}')
PSEUDO = {"AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix", "AWS::StackName",
          "AWS::NoValue", "AWS::StackId", "AWS::NotificationARNs"}
# SAM's generated resources a function's properties may name (e.g. the HTTP API's stage).
SAM_GENERATED = re.compile(r"^\w+(Role|Stage|ApiGatewayDefaultStage)$")


class Stack:
    """The template with parameter values: conditions and Fn::If resolved as CloudFormation
    does."""

    def __init__(self, template: dict[str, Any], given: dict[str, str]) -> None:
        self.template = template
        self.values = {name: str(spec.get("Default", "")) for name, spec in
                       template["Parameters"].items()}
        self.values.update(given)
        self.lists = {name for name, spec in template["Parameters"].items()
                      if spec.get("Type") == "CommaDelimitedList"}
        self.conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self.conditions:
            self.conditions[name] = bool(self.evaluate(self.template["Conditions"][name]))
        return self.conditions[name]

    def evaluate(self, expression: Any) -> Any:
        if not isinstance(expression, dict) or len(expression) != 1:
            return expression
        (function, argument), = expression.items()
        if function == "Ref":
            value = self.values.get(argument, argument)
            return value.split(",") if argument in self.lists else value
        if function == "Fn::Join":
            delimiter, items = argument
            return delimiter.join(str(v) for v in self.evaluate(items))
        if function == "Condition":
            return self.condition(argument)
        if function == "Fn::Equals":
            left, right = (str(self.evaluate(a)) for a in argument)
            return left == right
        if function == "Fn::Not":
            return not self.evaluate(argument[0])
        if function == "Fn::And":
            return all(self.evaluate(a) for a in argument)
        if function == "Fn::Or":
            return any(self.evaluate(a) for a in argument)
        raise ValueError(f"a condition's {function}")

    def created(self) -> dict[str, Any]:
        return {name: resource for name, resource in self.template["Resources"].items()
                if "Condition" not in resource or self.condition(resource["Condition"])}

    def references(self, expression: Any) -> set[str]:
        """The logical ids `expression` names once every Fn::If is resolved."""
        if isinstance(expression, list):
            return set().union(*(self.references(e) for e in expression)) if expression else set()
        if not isinstance(expression, dict):
            return set()
        if len(expression) == 1:
            (function, argument), = expression.items()
            if function == "Fn::If":
                name, then, otherwise = argument
                return self.references(then if self.condition(name) else otherwise)
            if function == "Ref":
                return {argument}
            if function == "Fn::GetAtt":
                return {argument[0] if isinstance(argument, list) else argument.split(".")[0]}
            if function == "Fn::Sub":
                text, extra = (argument, {}) if isinstance(argument, str) else argument
                named = {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text)}
                return (named - set(extra)) | self.references(list(extra.values()))
        return set().union(*(self.references(v) for v in expression.values()))


def defined(stack: Stack, created: dict[str, Any]) -> set[str]:
    return set(stack.template["Parameters"]) | PSEUDO | set(created)


class MinimumDeploy(unittest.TestCase):
    def setUp(self) -> None:
        self.template = load()

    def test_only_the_decision_token_secret_and_the_action_targets_are_required(self) -> None:
        required = {name for name, spec in self.template["Parameters"].items()
                    if "Default" not in spec}
        self.assertEqual(required, set(MINIMUM))

    def test_every_default_passes_its_own_constraints(self) -> None:
        for name, spec in self.template["Parameters"].items():
            if "Default" not in spec:
                continue
            default = str(spec["Default"])
            with self.subTest(parameter=name, default=default):
                if "AllowedPattern" in spec:
                    self.assertIsNotNone(re.fullmatch(spec["AllowedPattern"], default))
                if "AllowedValues" in spec:
                    self.assertIn(default, [str(v) for v in spec["AllowedValues"]])
                self.assertGreaterEqual(len(default), int(spec.get("MinLength", 0)))
                self.assertLessEqual(len(default), int(spec.get("MaxLength", 4096)))
                if spec.get("Type") == "Number":
                    self.assertGreaterEqual(float(default), float(spec.get("MinValue", "-inf")))
                    self.assertLessEqual(float(default), float(spec.get("MaxValue", "inf")))
        for name, value in MINIMUM.items():
            spec = self.template["Parameters"][name]
            self.assertGreaterEqual(len(value), int(spec.get("MinLength", 0)), name)

    def test_with_the_minimum_every_reference_names_what_is_created(self) -> None:
        stack = Stack(self.template, MINIMUM)
        created = stack.created()
        self.assertNotIn("NotifierUrlSecret", created, "no notifier, no secret for it")
        self.assertNotIn("ApiKeysSecret", created)
        self.assertNotIn("OidcSecret", created, "no sign-in, no secret for it")
        names = defined(stack, created)
        for logical, resource in created.items():
            with self.subTest(resource=logical):
                named = stack.references(resource.get("Properties", {}))
                depends = resource.get("DependsOn", [])
                named |= set([depends] if isinstance(depends, str) else depends)
                missing = {n for n in named - names if not SAM_GENERATED.match(n)}
                self.assertEqual(missing, set(), "names a resource the stack does not create")

    def test_with_every_option_every_reference_names_what_is_created(self) -> None:
        stack = Stack(self.template, {**MINIMUM, "NotifierUrl": "https://notify.example.com",
                                      "ApiKeys": "acme=k", "AlarmTopicArn": "arn:aws:sns:x",
                                      "Oidc": OIDC,
                                      "ReserveHeldReadConcurrency": "true",
                                      "ResumeStateMachineArns": "arn:aws:states:us-east-1:1:stateMachine:a",
                                      "ResumeFunctionArns": "arn:aws:lambda:us-east-1:1:function:a"})
        created = stack.created()
        self.assertIn("NotifierUrlSecret", created)
        self.assertIn("OidcSecret", created)
        names = defined(stack, created)
        for logical, resource in created.items():
            with self.subTest(resource=logical):
                named = stack.references(resource.get("Properties", {}))
                missing = {n for n in named - names if not SAM_GENERATED.match(n)}
                self.assertEqual(missing, set())

    def test_the_oidc_secret_exists_only_with_oidc_and_only_the_decide_function_and_the_executor_name_it(
            self) -> None:
        def variables(stack: Stack, function: dict[str, Any]) -> dict[str, Any]:
            """The function's environment as deployed: each Fn::If resolved, AWS::NoValue
            dropped."""
            out = {}
            for name, value in function["Properties"]["Environment"]["Variables"].items():
                while isinstance(value, dict) and "Fn::If" in value:
                    condition, then, otherwise = value["Fn::If"]
                    value = then if stack.condition(condition) else otherwise
                if value != {"Ref": "AWS::NoValue"}:
                    out[name] = value
            return out

        without = Stack(self.template, MINIMUM)
        self.assertNotIn("OidcSecret", without.created())
        for logical, resource in without.created().items():
            with self.subTest(oidc="none", resource=logical):
                self.assertNotIn("OidcSecret", without.references(resource.get("Properties", {})))
                if resource["Type"] == "AWS::Serverless::Function":
                    self.assertNotIn("OIDC_SECRET_ARN", variables(without, resource))

        given = Stack(self.template, {**MINIMUM, "Oidc": OIDC})
        created = given.created()
        self.assertIn("OidcSecret", created)
        naming = {logical for logical, resource in created.items()
                  if "OidcSecret" in given.references(resource.get("Properties", {}))}
        # The decide function's variable, and its role's GetSecretValue; and the executor's, whose
        # emails say whether to sign in (it already holds DECISION_TOKEN_SECRET, which signs the
        # sessions: the client secret gives it nothing more to forge). No other.
        self.assertEqual(naming, {"DecideFunction", "DecideRole", "ExecutorFunction", "ExecutorRole"})
        for logical, resource in created.items():
            if resource["Type"] != "AWS::Serverless::Function":
                continue
            with self.subTest(oidc="given", function=logical):
                arn = variables(given, resource).get("OIDC_SECRET_ARN")
                if logical in ("DecideFunction", "ExecutorFunction"):
                    self.assertEqual(arn, {"Ref": "OidcSecret"})
                    self.assertNotIn("OIDC", resource["Properties"]["Environment"]["Variables"])
                else:
                    self.assertIsNone(arn)

    def test_nothing_reserves_concurrency_by_default(self) -> None:
        stack = Stack(self.template, MINIMUM)
        for logical, resource in stack.created().items():
            if resource["Type"] != "AWS::Serverless::Function":
                continue
            reserved = resource["Properties"].get("ReservedConcurrentExecutions")
            if isinstance(reserved, dict) and "Fn::If" in reserved:
                name, then, otherwise = reserved["Fn::If"]
                reserved = then if stack.condition(name) else otherwise
            with self.subTest(function=logical):
                self.assertIn(reserved, (None, {"Ref": "AWS::NoValue"}),
                              "a new account may have a concurrency quota of 10")

    def test_retention_reaches_every_writer_and_every_table_of_an_approval(self) -> None:
        retention = self.template["Parameters"]["RetentionDays"]
        self.assertEqual((retention["Default"], retention["MinValue"]), (400, 0))
        for logical, resource in self.template["Resources"].items():
            if resource["Type"] == "AWS::Serverless::Function":
                variables = resource["Properties"]["Environment"]["Variables"]
                # The read function writes nothing of an approval (only the held reads' seats).
                expected = None if logical == "ReadFunction" else {"Ref": "RetentionDays"}
                with self.subTest(function=logical):
                    self.assertEqual(variables.get("RETENTION_DAYS"), expected)
            if resource["Type"] == "AWS::DynamoDB::Table" and logical in (
                    "ApprovalsTable", "ExecutionLedgerTable", "EventsTable", "ApprovalIndexTable"):
                with self.subTest(table=logical):
                    self.assertEqual(resource["Properties"]["TimeToLiveSpecification"],
                                     {"AttributeName": "retain_until", "Enabled": True})

    def test_tracing_defaults_to_pass_through_with_active_one_parameter_away(self) -> None:
        tracing = self.template["Parameters"]["TracingMode"]
        self.assertEqual(tracing["Default"], "PassThrough")
        self.assertIn("Active", tracing["AllowedValues"])
        self.assertEqual(self.template["Globals"]["Function"]["Tracing"], {"Ref": "TracingMode"})


if __name__ == "__main__":
    unittest.main()

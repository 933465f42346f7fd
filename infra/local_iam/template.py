"""The functions' roles in infra/template.yaml, resolved against one local stack.

A local stack is what one runner (or one test) uses: its tables, its jobs queue, its secrets,
named by the variables the functions get (APPROVALS_TABLE, JOBS_QUEUE_URL,
API_KEYS_SECRET_ARN, ...), and the parameter values a deployment would give. The template says
which resource each variable names (`APPROVALS_TABLE: !Ref ApprovalsTable`), so a role's
`!GetAtt ApprovalsTable.Arn` becomes that table's ARN here, `!Sub "${ApprovalsTable.Arn}/index/due"`
its index, `!If [HasApiKeys, ...]` follows the ApiKeys parameter, `!Ref AWS::NoValue`
drops out, and a CommaDelimitedList parameter is a list that `!Join` and `!Split` work on
(`!Split [",", !Sub ["${Arns}:*", {Arns: !Join [":*,", !Ref ResumeFunctionArns]}]]`: each ARN
given, suffixed), as CloudFormation resolves them. A resource the local stack does not have (a log
group, the dispatch-failure queue that only Lambda's event source mapping writes to) becomes an
ARN that names nothing: its grant exists, and matches no request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlparse

import yaml

from .policy import Resource, Statement

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "template.yaml")

NO_VALUE = object()


class _Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short forms (`!Ref X` -> {"Ref": "X"}, `!GetAtt A.B` ->
    {"Fn::GetAtt": ["A", "B"]}, `!Sub ...` -> {"Fn::Sub": ...})."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    if suffix == "Condition":
        return {"Condition": value}
    return {f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _tag)


def load(path: str = TEMPLATE) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_Loader)  # noqa: S506 - a SafeLoader with CloudFormation's tags


def source_text(expression: Any) -> str:
    """A resource expression as the template writes it, for naming a grant."""
    if isinstance(expression, str):
        return expression
    if "Ref" in expression:
        return expression["Ref"]
    if "Fn::GetAtt" in expression:
        return ".".join(expression["Fn::GetAtt"])
    if "Fn::Sub" in expression:
        sub = expression["Fn::Sub"]
        if isinstance(sub, str):
            return sub
        text = sub[0]
        for name, value in sub[1].items():
            text = text.replace("${" + name + "}", "${" + source_text(value) + "}")
        return text
    if "Fn::Split" in expression:
        return source_text(expression["Fn::Split"][1])
    if "Fn::Join" in expression:
        return source_text(expression["Fn::Join"][1])
    return repr(expression)


@dataclass(frozen=True)
class Role:
    """A function's role, resolved: its statements and the variables the function gets."""

    function: str  # the binary's name: api, read, decide, ...
    logical_id: str  # e.g. CreateRole
    statements: tuple[Statement, ...]
    variables: tuple[str, ...]

    def without(self, withheld: set[tuple[str, ...]]) -> Role:
        """The role without the grants (role, action, resource as written) in `withheld`."""
        if not withheld:
            return self
        kept = []
        for statement in self.statements:
            # A grant is one action on one resource: the statement split per action, each
            # keeping the resources not withheld from it.
            for action in statement.actions:
                own = [r for r in statement.resources if (self.logical_id, action, r.source) not in withheld]
                if own:
                    kept.append(statement.narrowed(action, own))
        return Role(self.function, self.logical_id, tuple(kept), self.variables)


class Resolver:
    """Resolves the template's intrinsic functions for one local stack."""

    def __init__(
        self,
        template: dict[str, Any],
        variables: dict[str, str],
        parameters: dict[str, str],
        region: str,
        account: str,
        stream_of: Callable[[str], str | None],
    ) -> None:
        self.template = template
        self.resources: dict[str, Any] = template["Resources"]
        self.region = region
        self.account = account
        self.stream_of = stream_of
        self.parameters = {
            name: str(spec.get("Default", "")) for name, spec in template.get("Parameters", {}).items()
        }
        self.parameters.update(parameters)
        self.lists = {name for name, spec in template.get("Parameters", {}).items()
                      if spec.get("Type") == "CommaDelimitedList"}
        # The value of `!Ref X` for each resource a function's variable names.
        self.refs: dict[str, str] = {}
        for props in self._functions().values():
            for variable, expression in props.get("Environment", {}).get("Variables", {}).items():
                if variable not in variables:
                    continue
                for branch in _branches(expression):
                    if isinstance(branch, dict) and "Ref" in branch:
                        self.refs.setdefault(branch["Ref"], variables[variable])
                    # A key named by its ARN (`!GetAtt Key.Arn`): the ARN the variable holds.
                    if isinstance(branch, dict) and "Fn::GetAtt" in branch:
                        logical = branch["Fn::GetAtt"][0]
                        if self.resources.get(logical, {}).get("Type") == "AWS::KMS::Key":
                            self.refs.setdefault(logical, variables[variable])
        self._conditions: dict[str, bool] = {}

    def _functions(self) -> dict[str, dict[str, Any]]:
        return {
            logical: resource.get("Properties", {})
            for logical, resource in self.resources.items()
            if resource.get("Type") == "AWS::Serverless::Function"
        }

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.value(self.template["Conditions"][name]))
        return self._conditions[name]

    def _absent(self, logical: str) -> str:
        # An ARN no request ever names: the local stack has no such resource.
        return f"arn:aws:local:{self.region}:{self.account}:absent/{logical}"

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Partition": "aws",
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            if name in self.lists:
                # CloudFormation trims each member of a CommaDelimitedList ("Parameters":
                # "each member string is space trimmed"): "a, b" is ["a", "b"].
                return [member.strip() for member in self.parameters[name].split(",")]
            return self.parameters[name]
        if name in self.refs:
            return self.refs[name]
        return self._absent(name)

    def get_att(self, logical: str, attribute: str) -> Any:
        kind = self.resources.get(logical, {}).get("Type")
        named = self.refs.get(logical)
        if named is None:
            return self._absent(f"{logical}.{attribute}")
        if kind == "AWS::DynamoDB::Table":
            table = named.rsplit("/", 1)[-1] if named.startswith("arn:") else named
            if attribute == "Arn":
                return f"arn:aws:dynamodb:{self.region}:{self.account}:table/{table}"
            if attribute == "StreamArn":
                return lambda: self.stream_of(table)
        if kind == "AWS::KMS::Key" and attribute == "Arn":
            return named
        if kind == "AWS::SQS::Queue" and attribute == "Arn":
            path = urlparse(named).path.strip("/").split("/")
            return f"arn:aws:sqs:{self.region}:{path[0]}:{path[-1]}"
        return self._absent(f"{logical}.{attribute}")

    def sub(self, spec: Any) -> str:
        text, extra = (spec, {}) if isinstance(spec, str) else (spec[0], spec[1])
        out, i = [], 0
        while i < len(text):
            start = text.find("${", i)
            if start < 0:
                out.append(text[i:])
                break
            end = text.index("}", start)
            out.append(text[i:start])
            name = text[start + 2 : end]
            if name in extra:
                value = self.value(extra[name])
            elif "." in name and not name.startswith("AWS::"):
                value = self.get_att(*name.split(".", 1))
            else:
                value = self.ref(name)
            if callable(value):
                raise ValueError(f"!Sub of {name}: a stream ARN inside a string")
            out.append(str(value))
            i = end + 1
        return "".join(out)

    def value(self, expression: Any) -> Any:
        """The expression's value: a string, a list, a bool, a stream ARN finder, or NO_VALUE."""
        if isinstance(expression, list):
            items = [self.value(e) for e in expression]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(expression, dict) or len(expression) != 1:
            if isinstance(expression, dict):
                return {k: self.value(v) for k, v in expression.items()}
            return expression
        (function, argument), = expression.items()
        if function == "Ref":
            return self.ref(argument)
        if function == "Fn::GetAtt":
            return self.get_att(argument[0], argument[1])
        if function == "Fn::Sub":
            return self.sub(argument)
        if function == "Fn::If":
            name, then, otherwise = argument
            return self.value(then if self.condition(name) else otherwise)
        if function == "Fn::Join":
            delimiter, items = argument
            values = self.value(items)
            return delimiter.join(str(v) for v in (values if isinstance(values, list) else [values]))
        if function == "Fn::Split":
            delimiter, text = argument
            return str(self.value(text)).split(delimiter)
        if function == "Fn::Equals":
            left, right = (self.value(a) for a in argument)
            return str(left) == str(right)
        if function == "Fn::Not":
            return not self.value(argument[0])
        if function == "Fn::And":
            return all(self.value(a) for a in argument)
        if function == "Fn::Or":
            return any(self.value(a) for a in argument)
        if function == "Condition":
            return self.condition(argument)
        return {function: self.value(argument)}

    def statement(self, raw: dict[str, Any]) -> Statement:
        actions = raw["Action"] if isinstance(raw["Action"], list) else [raw["Action"]]
        written = raw["Resource"] if isinstance(raw["Resource"], list) else [raw["Resource"]]
        resources = []
        for expression in written:
            value = self.value(expression)
            if value is NO_VALUE:
                continue
            source = source_text(expression)
            if isinstance(expression, dict) and "Fn::If" in expression:
                # The branch taken names the grant.
                name, then, otherwise = expression["Fn::If"]
                source = source_text(then if self.condition(name) else otherwise)
            # A list (a Split): each of its ARNs, one grant.
            for each in value if isinstance(value, list) else [value]:
                resources.append(Resource(each, source))
        # A condition's values may be parameters too (`ses:FromAddress: !Ref EmailSenders`).
        condition = {
            operator: {key: self.value(values) for key, values in tests.items()}
            for operator, tests in (raw.get("Condition") or {}).items()
        } or None
        return Statement.make(raw["Effect"], actions, resources, condition)

    def roles(self) -> dict[str, Role]:
        """Each function's role, by the function's binary name."""
        globals_variables = self.template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
        roles = {}
        for logical, props in self._functions().items():
            role_logical = props["Role"]["Fn::GetAtt"][0]
            binary = self.resources[logical]["Metadata"]["BuildProperties"]["Binary"]
            statements = []
            for policy in self.resources[role_logical]["Properties"].get("Policies", []):
                for raw in policy["PolicyDocument"]["Statement"]:
                    if "Fn::If" in raw:
                        name, then, otherwise = raw["Fn::If"]
                        raw = then if self.condition(name) else otherwise
                    if raw == {"Ref": "AWS::NoValue"}:
                        continue
                    statements.append(self.statement(raw))
            variables = {**globals_variables, **props.get("Environment", {}).get("Variables", {})}
            roles[binary] = Role(binary, role_logical, tuple(statements), tuple(sorted(variables)))
        return roles


def _branches(expression: Any) -> list[Any]:
    """What an expression may be, under any parameter values: both branches of each `!If`,
    without `AWS::NoValue`."""
    if isinstance(expression, dict) and "Fn::If" in expression:
        _, then, otherwise = expression["Fn::If"]
        return _branches(then) + _branches(otherwise)
    if isinstance(expression, dict) and expression.get("Ref") == "AWS::NoValue":
        return []
    return [expression]


def all_grants(template: dict[str, Any]) -> set[tuple[str, str, str]]:
    """Every (role, action, resource as written) the template can grant, under any parameter
    values."""
    grants: set[tuple[str, str, str]] = set()
    branches = _branches

    for logical, resource in template["Resources"].items():
        if resource.get("Type") != "AWS::IAM::Role":
            continue
        for policy in resource["Properties"].get("Policies", []):
            for raw in policy["PolicyDocument"]["Statement"]:
                for statement in branches(raw):
                    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                    written = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                    for expression in written:
                        for branch in branches(expression):
                            for action in actions:
                                grants.add((logical, action, source_text(branch)))
    return grants

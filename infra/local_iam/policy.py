"""How AWS evaluates an identity-based policy, for the statements the local stack's roles hold.

The rules, as the IAM User Guide states them (each is tested in infra/tests/test_local_iam.py
with the guide's own examples):

- Deny by default: a request is allowed only when some statement allows it, and an explicit
  Deny overrides any Allow ("Policy evaluation logic", "Determining whether a request is allowed
  or denied within an account",
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
- Action: `service:Operation`, matched without regard to case, `*` and `?` wildcards
  ("IAM JSON policy elements: Action": "The prefix and the action name are case insensitive").
- Resource: the ARN, matched with regard to case. `*` stands for any run of characters inside
  one ARN segment (the parts between colons), `/` included, and, as the last character of a
  segment, may run on past the colons; `?` stands for one character ("IAM JSON policy elements:
  Resource", "Using wildcards in resource ARNs").
- Condition: every operator block must hold, every key of a block must hold, and a key holds
  when the request's value matches any of the policy's values. A key the request does not carry
  fails a positive operator and passes a negated one; `...IfExists` passes when it is absent.
  `ForAllValues:` holds when every value of the request's set matches (so also for an empty or
  absent set), `ForAnyValue:` when at least one does ("IAM JSON policy elements: Condition
  operators" and "Multivalued context keys", https://docs.aws.amazon.com/IAM/latest/UserGuide/
  reference_policies_condition-single-vs-multi-valued-context-keys.html).

Only the operators the template uses, and their negations, are known; a statement with any other
operator fails loudly at registration rather than being evaluated wrongly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

# A request's context: condition key (lower case) -> its values (a list, even when single).
Context = dict[str, list[str]]


def _wildcard(pattern: str, *, segments: bool, ignore_case: bool) -> re.Pattern[str]:
    """A compiled regex for an IAM pattern with `*` and `?`."""
    out = []
    for i, ch in enumerate(pattern):
        if ch == "*":
            last_in_segment = i + 1 == len(pattern) or pattern[i + 1] == ":"
            out.append(".*" if not segments or last_in_segment else "[^:]*")
        elif ch == "?":
            out.append("[^:]" if segments else ".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out) + r"\Z", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _string_like(pattern: str) -> re.Pattern[str]:
    return _wildcard(pattern, segments=False, ignore_case=False)


# The positive string operators: (the policy's value, the request's value) -> match.
_STRING_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda policy, value: policy == value,
    "StringEqualsIgnoreCase": lambda policy, value: policy.lower() == value.lower(),
    "StringLike": lambda policy, value: _string_like(policy).match(value) is not None,
}
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
}


class UnsupportedPolicy(ValueError):
    """A policy element this evaluator does not know: refused, never guessed at."""


@dataclass(frozen=True)
class ConditionTest:
    """One `operator: {key: values}` entry of a Condition block."""

    qualifier: str | None  # "ForAllValues", "ForAnyValue" or None
    operator: str  # the positive operator
    negated: bool
    if_exists: bool
    key: str  # lower case: condition keys are not case sensitive
    values: tuple[str, ...]

    @staticmethod
    def parse(operator: str, key: str, values: Any) -> ConditionTest:
        qualifier = None
        name = operator
        if ":" in name:
            qualifier, name = name.split(":", 1)
            if qualifier not in ("ForAllValues", "ForAnyValue"):
                raise UnsupportedPolicy(f"condition qualifier {qualifier}")
        if_exists = name.endswith("IfExists")
        if if_exists:
            name = name[: -len("IfExists")]
        negated = name in _NEGATED
        positive = _NEGATED.get(name, name)
        if positive not in _STRING_OPERATORS:
            raise UnsupportedPolicy(f"condition operator {operator}")
        listed = values if isinstance(values, list) else [values]
        return ConditionTest(qualifier, positive, negated, if_exists, key.lower(), tuple(str(v) for v in listed))

    def _matches_any(self, value: str) -> bool:
        test = _STRING_OPERATORS[self.operator]
        hit = any(test(policy, value) for policy in self.values)
        return not hit if self.negated else hit

    def holds(self, context: Context) -> bool:
        present = self.key in context
        values = context.get(self.key, [])
        if self.qualifier == "ForAllValues":
            return all(self._matches_any(v) for v in values)
        if self.qualifier == "ForAnyValue":
            return any(self._matches_any(v) for v in values)
        if not present:
            return self.if_exists or self.negated
        # A single-valued key: its one value.
        return any(self._matches_any(v) for v in values)


def parse_condition(block: dict[str, Any] | None) -> tuple[ConditionTest, ...]:
    tests = []
    for operator, keys in (block or {}).items():
        for key, values in keys.items():
            tests.append(ConditionTest.parse(operator, key, values))
    return tuple(tests)


@dataclass(frozen=True)
class Resource:
    """A statement's resource: its pattern, or a function that finds it when a request is
    evaluated (a table's stream, whose ARN exists only once the table does)."""

    pattern: str | Callable[[], str | None]
    # What the template says (e.g. `${ApprovalsTable.Arn}/index/due`): the grant's name.
    source: str

    def matches(self, arn: str) -> bool:
        pattern = self.pattern() if callable(self.pattern) else self.pattern
        if pattern is None:
            return False
        return _resource_regex(pattern).match(arn) is not None


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def _resource_regex(pattern: str) -> re.Pattern[str]:
    found = _REGEX_CACHE.get(pattern)
    if found is None:
        found = _REGEX_CACHE[pattern] = _wildcard(pattern, segments=True, ignore_case=False)
    return found


@dataclass(frozen=True)
class Statement:
    effect: str  # "Allow" or "Deny"
    actions: tuple[str, ...]  # as written, e.g. "dynamodb:GetItem"
    resources: tuple[Resource, ...]
    conditions: tuple[ConditionTest, ...] = ()
    _action_regexes: tuple[re.Pattern[str], ...] = field(default=(), compare=False)

    @staticmethod
    def make(effect: str, actions: list[str], resources: list[Resource], condition: dict[str, Any] | None = None) -> Statement:
        if effect not in ("Allow", "Deny"):
            raise UnsupportedPolicy(f"Effect {effect}")
        regexes = tuple(_wildcard(a, segments=False, ignore_case=True) for a in actions)
        return Statement(effect, tuple(actions), tuple(resources), parse_condition(condition), regexes)

    def narrowed(self, action: str, resources: list[Resource]) -> Statement:
        """This statement for one of its actions and some of its resources."""
        regex = self._action_regexes[self.actions.index(action)]
        return Statement(self.effect, (action,), tuple(resources), self.conditions, (regex,))

    def matching_action(self, action: str) -> str | None:
        for written, regex in zip(self.actions, self._action_regexes):
            if regex.match(action):
                return written
        return None

    def matching_resource(self, arn: str) -> Resource | None:
        return next((r for r in self.resources if r.matches(arn)), None)

    def conditions_hold(self, context: Context) -> bool:
        return all(test.holds(context) for test in self.conditions)


@dataclass(frozen=True)
class Grant:
    """What allowed a request: the statement's action and resource as the template writes them."""

    action: str
    resource: str


def evaluate(statements: Sequence[Statement], action: str, arn: str, context: Context) -> Grant | None:
    """The grant that allows `action` on `arn`, or None when the request is denied (no Allow
    matches, or a Deny does)."""
    allowed: Grant | None = None
    for statement in statements:
        written = statement.matching_action(action)
        if written is None:
            continue
        resource = statement.matching_resource(arn)
        if resource is None or not statement.conditions_hold(context):
            continue
        if statement.effect == "Deny":
            return None
        allowed = allowed or Grant(written, resource.source)
    return allowed

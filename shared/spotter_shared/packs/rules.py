"""Seed 002 §4: constraint rules as data. A pack (or an organization) declares rules in YAML; each has
a condition in CEL (Common Expression Language, evaluated by cel-python: no `eval`, no attribute
access beyond the data given) over `tool`, `params` and `context`, and one of seed 002's actions:
`require_confirmation`, `check_permission` (by role), `warn`, `block`. A rule that does not parse is
refused when the rules are loaded, with its line."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

import celpy
import yaml

log = logging.getLogger(__name__)

Action = Literal["require_confirmation", "check_permission", "warn", "block"]
ACTIONS: Final = get_args(Action)
ROLES: Final = ("owner", "admin", "coach", "member")


class RuleError(ValueError):
    """Rules that cannot be loaded: what and where."""


@dataclass(frozen=True)
class Rule:
    name: str
    condition: str
    action: Action
    message: str
    line: int
    roles: tuple[str, ...] = ()  # check_permission: the roles allowed
    program: Any = field(default=None, compare=False, repr=False)


@dataclass
class Verdict:
    """What the rules say about one call, in rule order: blocked and denied stop it, confirm gates it,
    warnings go with it; `errors` are conditions that could not be evaluated (they do not match)."""

    blocked: Rule | None = None
    denied: Rule | None = None
    confirm: Rule | None = None
    warnings: list[Rule] = field(default_factory=list)
    errors: list[tuple[Rule, str]] = field(default_factory=list)

    @property
    def stops(self) -> Rule | None:
        return self.blocked or self.denied


_ENV: Final = celpy.Environment()


def load_rules(text: str, *, source: str = "rules") -> list[Rule]:
    """Parse a rules document (`rules: [{name, condition, action, message, roles?}]`)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise RuleError(f"{source}: not YAML: {exc}") from None
    if root is None:
        return []
    data = yaml.safe_load(text)
    items = data.get("rules") if isinstance(data, dict) else None
    nodes = _rule_nodes(root)
    if not isinstance(items, list):
        raise RuleError(f"{source}: expected a top-level `rules:` list")
    rules, names = [], set()
    for item, node in zip(items, nodes, strict=True):
        line = node.start_mark.line + 1
        where = f"{source} line {line}"
        if not isinstance(item, dict):
            raise RuleError(f"{where}: a rule is a mapping with name, condition, action and message")
        unknown = set(item) - {"name", "condition", "action", "message", "roles"}
        if unknown:
            raise RuleError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        name, condition, action = item.get("name"), item.get("condition"), item.get("action")
        if not isinstance(name, str) or not name or name in names:
            raise RuleError(f"{where}: each rule needs a unique name")
        if action not in ACTIONS:
            raise RuleError(f"{where}: rule {name}: action must be one of {', '.join(ACTIONS)}")
        if not isinstance(condition, str) or not condition.strip():
            raise RuleError(f"{where}: rule {name}: a condition is required")
        roles = tuple(item.get("roles") or ())
        if action == "check_permission" and (not roles or not set(roles) <= set(ROLES)):
            raise RuleError(f"{where}: rule {name}: check_permission needs `roles:` from {', '.join(ROLES)}")
        try:
            program = _ENV.program(_ENV.compile(condition))
        except celpy.CELParseError as exc:
            raise RuleError(f"{where}: rule {name}: the condition does not parse: {str(exc).splitlines()[0]}") from None
        names.add(name)
        rules.append(Rule(name=name, condition=condition, action=action, message=str(item.get("message") or name),
                          line=line, roles=roles, program=program))
    return rules


def evaluate(rules: Sequence[Rule], *, tool: Mapping[str, Any], params: Mapping[str, Any],
             context: Mapping[str, Any]) -> Verdict:
    activation = {"tool": celpy.json_to_cel(dict(tool)), "params": celpy.json_to_cel(dict(params)),
                  "context": celpy.json_to_cel(dict(context))}
    verdict = Verdict()
    for rule in rules:
        try:
            matched = rule.program.evaluate(activation)
        except celpy.CELEvalError as exc:
            verdict.errors.append((rule, str(exc.args[0]) if exc.args else type(exc).__name__))
            continue
        if not isinstance(matched, celpy.celtypes.BoolType):
            verdict.errors.append((rule, f"the condition gave {type(matched).__name__}, not a boolean"))
            continue
        if not matched:
            continue
        match rule.action:
            case "block":
                verdict.blocked = verdict.blocked or rule
            case "check_permission":
                if context.get("role") not in rule.roles:
                    verdict.denied = verdict.denied or rule
            case "require_confirmation":
                verdict.confirm = verdict.confirm or rule
            case "warn":
                verdict.warnings.append(rule)
    for rule, error in verdict.errors:
        log.warning("rule %s (line %d) could not be evaluated: %s", rule.name, rule.line, error)
    return verdict


def _rule_nodes(root: yaml.Node) -> list[yaml.Node]:
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if getattr(key, "value", None) == "rules" and isinstance(value, yaml.SequenceNode):
                return list(value.value)
    return []

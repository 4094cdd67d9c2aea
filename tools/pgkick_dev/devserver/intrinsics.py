"""CloudFormation's intrinsics, evaluated as a deploy would from the template alone.

Why apart from what `pgkick dev` reads (pgkick_dev.devserver.settings): evaluating the
template is one job (its short tags read as YAML, `!Ref` of a parameter or of a schedule
group, `!If` on a condition, `!Not`, `!Equals`, `!And`, `!Or`, `!Join`, `!Sub` of
parameters and pseudo parameters), and what the stand-in takes from it is another. One that
cannot be evaluated here (`!GetAtt`, a parameter with no value, ${AWS::StackName} without
samconfig.toml's stack_name) raises Unknown, and the caller says so rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

from pgkick_dev.devserver.function_names import ACCOUNT, REGION

NO_VALUE = object()  # !Ref AWS::NoValue: the property is left out
_SUBSTITUTION = re.compile(r"\$\{([^}!]+)\}")
# the stand-in's account and region (its ARNs'): what the local stack's names carry
PSEUDO = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws"}


class _Loader(yaml.SafeLoader):  # type: ignore[misc,unused-ignore]
    """CloudFormation's short tags (!Ref, !Sub, !If, ...) read as {"Ref": ...} dicts."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type,unused-ignore]
    return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _intrinsic)


class Unknown(Exception):
    """An intrinsic the stand-in cannot evaluate from the template alone."""


@dataclass
class Template:
    """A template's Parameters (their Defaults: the deploy's values once applied), its
    Conditions and its Resources, to evaluate intrinsics; `stack_name` for
    ${AWS::StackName} (samconfig.toml's; None: unknown)."""

    parameters: dict[str, Any]
    conditions: dict[str, Any]
    resources: dict[str, Any] = field(default_factory=dict)
    stack_name: str | None = None
    mappings: dict[str, Any] = field(default_factory=dict)  # the template's Mappings

    def value(self, node: Any) -> Any:
        """A property's value as deployed with the Defaults; NO_VALUE if left out."""
        if not isinstance(node, dict) or len(node) != 1:
            return node
        ((key, arg),) = node.items()
        if key == "Ref":
            if arg == "AWS::NoValue":
                return NO_VALUE
            if arg not in self.parameters:
                return self._reference(str(arg))
            parameter = self.parameters.get(arg)
            if not isinstance(parameter, dict) or "Default" not in parameter:
                raise Unknown(f"!Ref {arg} (no Default to use)")
            if parameter.get("Type") == "CommaDelimitedList":
                return [p for p in str(parameter["Default"]).split(",") if p] or [""]
            return parameter["Default"]
        if key == "Fn::If":
            condition, then, otherwise = arg
            return self.value(then if self.condition(condition) else otherwise)
        if key == "Fn::Join":
            separator, items = arg
            parts = self.value(items)
            if not isinstance(parts, list):
                raise Unknown(f"!Join of {items!r}")
            return str(separator).join(str(self.value(p)) for p in parts)
        if key == "Fn::FindInMap":
            return self._find_in_map(arg)
        if key == "Fn::Sub" and isinstance(arg, str):
            return _SUBSTITUTION.sub(lambda m: str(self._substitute(m.group(1))), arg)
        raise Unknown(f"!{key.removeprefix('Fn::')}")

    def _find_in_map(self, arg: Any) -> Any:
        """!FindInMap [map, top key, second key], each key evaluated first (a `!Ref` of a
        parameter); a key the map lacks fails the deploy, so it is Unknown here."""
        name, top, second = (str(self.value(a)) for a in arg)
        try:
            return self.mappings[name][top][second]
        except (KeyError, TypeError):
            raise Unknown(f"!FindInMap [{name}, {top}, {second}] (not in Mappings)") from None

    def _substitute(self, name: str) -> Any:
        if name == "AWS::StackName":
            if self.stack_name is None:
                raise Unknown("${AWS::StackName} (no stack_name in samconfig.toml)")
            return self.stack_name
        if name in PSEUDO:
            return PSEUDO[name]
        return self.value({"Ref": name})

    def _reference(self, name: str) -> Any:
        """!Ref of a resource: what CloudFormation returns for the kinds the stand-in
        knows (a schedule group: its name), else Unknown."""
        resource = self.resources.get(name)
        if isinstance(resource, dict) and resource.get("Type") == "AWS::Scheduler::ScheduleGroup":
            return self.value((resource.get("Properties") or {}).get("Name", NO_VALUE))
        raise Unknown(f"!Ref {name}")

    def condition(self, name: str) -> bool:
        if name not in self.conditions:
            raise Unknown(f"condition {name} (not in Conditions)")
        return self.truth(self.conditions[name])

    def truth(self, node: Any) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::Not":
                return not self.truth(arg[0])
            if key == "Fn::And":
                return all(self.truth(a) for a in arg)
            if key == "Fn::Or":
                return any(self.truth(a) for a in arg)
            if key == "Fn::Equals":
                left, right = (self.value(a) for a in arg)
                return str(left) == str(right)  # CloudFormation compares strings
            if key in ("Fn::EachMemberEquals", "Fn::Contains"):  # the Rules section's own
                members, wanted = self.value(arg[0]), str(self.value(arg[1]))
                found = (str(m) == wanted for m in members)
                return all(found) if key == "Fn::EachMemberEquals" else any(found)
        raise Unknown(f"condition {node!r}")

    def broken_rule(self, rules: dict[str, Any]) -> str | None:
        """The first of the template's Rules the parameter values break, in the words
        CloudFormation's ValidationError gives (the assertion's description); None if all
        hold. A rule the evaluator cannot read is Unknown."""
        for name, rule in rules.items():
            if "RuleCondition" in rule and not self.truth(rule["RuleCondition"]):
                continue
            for assertion in rule.get("Assertions") or []:
                if not self.truth(assertion["Assert"]):
                    said = assertion.get("AssertDescription") or "Assertion failed"
                    return f"{said} (rule {name})"
        return None


def load(path: Path) -> dict[str, Any]:
    """The template as a document, its short tags as {"Ref": ...} / {"Fn::...": ...}."""
    return yaml.load(path.read_text(), Loader=_Loader) or {}

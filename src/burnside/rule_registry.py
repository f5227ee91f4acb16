"""Every rule burnside has, lint (BS…) and diagnosis (D…): the registry `burnside explain` looks up.

It sits above both rule packages (`burnside.lint.rules`, `burnside.diagnose.rules`), which import
the rule shape from `burnside.rule` below them.
"""

from __future__ import annotations

from burnside.diagnose.rules import RULES as DIAGNOSIS
from burnside.lint.rules import RULES as LINT
from burnside.rule import Rule


def all_rules() -> list[Rule]:
    """Every lint rule, then every diagnosis rule, each in ID order."""
    rules = [Rule.of(m, "lint") for m in LINT.values()] + [Rule.of(m, "diagnosis") for m in DIAGNOSIS]
    return sorted(rules, key=lambda r: (r.kind != "lint", r.id))


def find_rule(rule_id: str) -> Rule | None:
    """The rule with this ID (any case), or None."""
    wanted = rule_id.strip().upper()
    return next((r for r in all_rules() if r.id == wanted), None)

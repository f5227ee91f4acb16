"""Name the failure a comparison shows, with its fix: pure functions over a `Comparison`."""

from __future__ import annotations

from types import ModuleType

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.diagnose.rules import RULES


def diagnose(comparison: Comparison) -> list[Diagnosis]:
    """Every rule's findings, causes first."""
    return [d for rule in RULES for d in rule.check(comparison)]


def rule_doc(rule_id: str) -> ModuleType | None:
    """The rule module with this ID (its docstring is what `burnside explain` prints)."""
    return next((r for r in RULES if rule_id.upper() == r.ID), None)


__all__ = ["Diagnosis", "RULES", "diagnose", "rule_doc"]

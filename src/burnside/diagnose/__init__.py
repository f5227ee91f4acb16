"""Name the failure a comparison shows, with its fix: pure functions over a `Comparison`."""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.diagnose.rules import RULES


def diagnose(comparison: Comparison) -> list[Diagnosis]:
    """Every rule's findings, causes first."""
    return [d for rule in RULES for d in rule.check(comparison)]


__all__ = ["Diagnosis", "RULES", "diagnose"]

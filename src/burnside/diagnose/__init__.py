"""Name the failure a comparison shows, with its fix: pure functions over a `Comparison`."""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.diagnose.rules import RULES


def diagnose(comparison: Comparison) -> list[Diagnosis]:
    """Every rule's findings, causes first; a rule with findings drops those of the rules it names in its
    ``SUPERSEDES`` (a more precise name of the same divergence: D017's measured loss over D010's generic one); a
    finding that ``follows`` from another's cause (the port's run diverging after it parted) comes after the rest."""
    found = [(rule, rule.check(comparison)) for rule in RULES]
    dropped = {rid for rule, ds in found if ds for rid in getattr(rule, "SUPERSEDES", ())}
    kept = [d for _, ds in found for d in ds if d.rule not in dropped]
    return [d for d in kept if not d.follows] + [d for d in kept if d.follows]


__all__ = ["Diagnosis", "RULES", "diagnose"]

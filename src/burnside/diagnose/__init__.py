"""Name the failure a comparison shows, with its fix: pure functions over a `Comparison`."""

from __future__ import annotations

import dataclasses

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
    kept = _with_known_defaults(comparison, kept)
    return [d for d in kept if not d.follows] + [d for d in kept if d.follows]


#: The rules that name a layer computing otherwise, whose fix the catalogue's known defaults complete.
_LAYER_RULES = ("D010", "D011", "D013")


def _with_known_defaults(comparison: Comparison, diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """The layer rules' diagnoses with the known burn defaults of the diverging layer's class added to their fix
    (`burnside.catalogue`), leaving out a default the fix already sets."""
    from burnside.catalogue import default_note

    out = []
    for d in diagnoses:
        note = default_note(comparison, d.fix) if d.rule in _LAYER_RULES and not d.follows else ""
        out.append(dataclasses.replace(d, fix=d.fix + note) if note else d)
    return out


__all__ = ["Diagnosis", "RULES", "diagnose"]

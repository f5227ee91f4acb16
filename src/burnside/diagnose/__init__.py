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
    alone = {rule.ID for rule, ds in found if ds and getattr(rule, "ONLY_ALONE", False)}
    if any(d.rule not in alone and not d.follows for d in kept):  # a generic symptom another rule names precisely
        kept = [d for d in kept if d.rule not in alone]
    kept = _with_known_defaults(comparison, kept)
    return [d for d in kept if not d.follows] + [d for d in kept if d.follows]


def _with_known_defaults(comparison: Comparison, diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """Each diagnosis with the known burn differences of what it is about (its rule's ``CATALOGUE``: the diverging
    layer's class, the loss, the optimizer, as `burnside.catalogue` reads them) added to its fix, leaving out a
    default the fix already sets."""
    from burnside.catalogue import note_for

    subjects = {rule.ID: getattr(rule, "CATALOGUE", "") for rule in RULES}
    out = []
    for d in diagnoses:
        note = "" if d.follows else note_for(subjects[d.rule], comparison, d.fix)
        # the note is sentences of its own: end the fix's sentence first
        out.append(dataclasses.replace(d, fix=d.fix.rstrip() + ("" if d.fix.rstrip().endswith(".") else ".") + note)
                   if note else d)
    return out


__all__ = ["Diagnosis", "RULES", "diagnose"]

"""`Diagnosis`: a named failure found in a comparison, with its evidence and its fix."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnosis:
    """One finding of a diagnosis rule."""

    rule: str  # stable ID, e.g. "D001"
    title: str  # short name, e.g. "optimizer step result discarded"
    evidence: str  # what in the traces shows it, with numbers
    fix: str  # what to change in the code
    #: a consequence of a cause other rules name (a port's run that diverges after it parted): listed after them
    follows: bool = False

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"rule": self.rule, "title": self.title, "evidence": self.evidence, "fix": self.fix}


def listed(names: list[str], most: int) -> str:
    """The first ``most`` names, comma-separated, and how many more there are."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def number(value: object) -> float | None:
    """A finite real number from trace metadata, or None for anything else (a string, a list, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None

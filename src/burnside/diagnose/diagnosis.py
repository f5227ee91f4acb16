"""`Diagnosis`: a named failure found in a comparison, with its evidence and its fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnosis:
    """One finding of a diagnosis rule."""

    rule: str  # stable ID, e.g. "D001"
    title: str  # short name, e.g. "optimizer step result discarded"
    evidence: str  # what in the traces shows it, with numbers
    fix: str  # what to change in the code

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"rule": self.rule, "title": self.title, "evidence": self.evidence, "fix": self.fix}

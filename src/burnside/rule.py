"""`Rule`: the one shape of a lint rule (BS…) and a diagnosis rule (D…).

A rule is a module with `ID` (stable, `BS001` / `D001`), `NAME` (kebab-case), `TITLE` (one
line), `SEVERITY`, a docstring in four sections (What it does / Why is this bad? / Example /
Use instead) and `check(...)`: a lint rule checks a parsed source unit, a diagnosis rule a
`Comparison`. What a rule knows beyond that it declares in its module too: a lint rule its `TOKENS` (the
engine's prefilter, `burnside.lint.prefilter`), a diagnosis rule its `PRECEDENCE` (its place in the report
order) and, where its fix gains the catalogue's notes, its `CATALOGUE` subject (`burnside.catalogue.SUBJECTS`).
Its fixtures are files named after its ID: `tests/lint/fixtures/bs001_{bad,good}.rs`,
`tests/diagnose/fixtures/d001_{bad,good}.{a,b}.json`.

Both rule packages import this module, so it imports nothing of burnside's; the registry of every
rule, which imports both packages, is `burnside.rule_registry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import ModuleType


class Severity(str, Enum):
    """How bad a finding is: an error fails the run, a warning asks for a look, info is a note."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def demoted(self) -> Severity:
        """One level down; info stays info so test code still shows its notes."""
        if self is Severity.ERROR:
            return Severity.WARNING
        return Severity.INFO


@dataclass(frozen=True)
class Rule:
    """A rule's identity and documentation, read from its module."""

    id: str
    name: str
    title: str
    severity: Severity
    doc: str
    kind: str  # "lint" or "diagnosis"
    module: ModuleType

    @classmethod
    def of(cls, module: ModuleType, kind: str) -> Rule:
        """The rule a module defines."""
        return cls(module.ID, module.NAME, module.TITLE, module.SEVERITY, module.__doc__ or "", kind, module)

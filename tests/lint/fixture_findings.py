"""The lint fixture directory and a helper returning (rule, line, column) per finding."""

from __future__ import annotations

from pathlib import Path

from burnside.lint import lint_paths, select_rules

FIXTURES = Path(__file__).parent / "fixtures"


def findings_of(name: str, *, select: list[str] | None = None) -> list[tuple[str, int, int]]:
    report = lint_paths([FIXTURES / name], select_rules(select), root=FIXTURES, jobs=1)
    return [(f.rule, f.line, f.column) for f in report.findings]

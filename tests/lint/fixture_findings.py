"""The lint fixture directory and a helper returning (rule, line, column) per finding."""

from __future__ import annotations

from pathlib import Path

from burnside.lint import lint_paths, select_rules

FIXTURES = Path(__file__).parent / "fixtures"
#: burnside's own burn programs, the seed pages' programs as they are built and run (rust/).
RUST = Path(__file__).resolve().parents[2] / "rust"
NOASSIGN = "train-one/src/bin/noassign.rs"  # S7
HELPER = "pitb-opt/src/bin/helper.rs"  # S11
OTHERGRADS = "pitb-opt/src/bin/othergrads.rs"  # S14
LINT = "pitb-opt/src/bin/lint.rs"  # S15
BUGS = "a1-bugs/src/main.rs"  # `run a1 --bug`: a dropped step, other grads, Adam's default epsilon
TRAIN_STEP = "train-step/src/main.rs"  # S1: the correct loop


def findings_of(name: str, *, select: list[str] | None = None, root: Path = FIXTURES) -> list[tuple[str, int, int]]:
    report = lint_paths([root / name], select_rules(select), root=root, jobs=1)
    return [(f.rule, f.line, f.column) for f in report.findings]


def at(name: str, code: str, *, root: Path = RUST) -> tuple[int, int]:
    """(line, column), 1-based, of the one place ``code`` stands in file ``name``: expectations on the
    repository's own programs name the code they point at, so editing the program elsewhere does not
    move them."""
    lines = (root / name).read_text().splitlines()
    places = [(i + 1, line.index(code) + 1) for i, line in enumerate(lines) if code in line]
    assert len(places) == 1, f"{code!r} stands {len(places)} times in {name}"
    return places[0]

"""`burnside lint` on the project's own burn programs (rust/): each seed bug is flagged, train-step is clean."""

from __future__ import annotations

from pathlib import Path

from burnside.lint.engine import lint_paths, select_rules

RUST = Path(__file__).resolve().parents[2] / "rust"


def _rules_by_file() -> dict[str, set[str]]:
    report = lint_paths([RUST], select_rules(), root=RUST)
    found: dict[str, set[str]] = {}
    for finding in report.findings:
        found.setdefault(finding.path, set()).add(finding.rule)
    return found


def test_each_seed_program_is_flagged_with_its_rule():
    found = _rules_by_file()
    assert found["train-one/src/bin/noassign.rs"] == {"BS001"}  # S7
    assert found["train-one/src/bin/discard.rs"] == {"BS001"}  # S8
    assert found["pitb-opt/src/bin/helper.rs"] == {"BS001"}  # S11
    assert found["pitb-opt/src/lib.rs"] == {"BS001"}  # S12/S13: the clone version's discarded step
    assert found["pitb-opt/src/bin/othergrads.rs"] == {"BS002"}  # S14
    assert found["pitb-opt/src/bin/lint.rs"] == {"BS001"}  # S15
    assert found["train-one/src/bin/moves.rs"] == {"BS002"}  # S6: the wrong-model pairing
    # the bugs `burnside run a1 --bug` can build in that lint sees: dropped step, other grads,
    # default epsilon, default dampening (the others live in numbers: literal lr, clipping, ...)
    # (its optimizer-default bugs, BS008-BS010, are checked line by line in test_rules)
    assert (found["a1-bugs/src/main.rs"] - {"BS008", "BS009", "BS010"}
            == {"BS001", "BS002", "BS003", "BS004", "BS005"})


def test_train_step_and_the_recorder_are_clean():
    found = _rules_by_file()
    assert not any(path.startswith(("train-step/", "burnside-trace/", "a1/")) for path in found), found

"""A bounded fuzzing run with a fixed seed: no crash, no hang, no wrong verdict (the long run:
benchmarks/fuzz_traces.py)."""

from __future__ import annotations

from tests.hostile.trace_fuzzer import FORMS, fuzz

MUTANTS_PER_FORM = 60


def test_fuzzed_inputs_never_crash_hang_or_give_a_wrong_verdict():
    report = fuzz(MUTANTS_PER_FORM, seed=20261129, timeout=20.0)
    summary = "\n".join(report.lines())
    for form in FORMS:
        counts = report.counts[form]
        assert counts.mutants == MUTANTS_PER_FORM, summary
        assert counts.crashes == 0 and counts.hangs == 0 and counts.wrong == 0, summary
    # The mutants reach both outcomes: some are refused, some get through to compare and diagnose.
    assert all(report.counts[f].rejected > 0 for f in FORMS), summary
    assert all(report.counts[f].accepted > 0 for f in FORMS), summary

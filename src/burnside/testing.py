"""Parity checks inside a user's own test suite: `assert_parity(torch_trace, burn_trace, reference=...)`.

    from burnside.testing import assert_parity

    def test_my_port_trains_like_pytorch(tmp_path):
        ...  # record both sides, and the float64 reference (burnside.reference.record_reference)
        assert_parity(tmp_path / "torch.safetensors", tmp_path / "burn.safetensors",
                      reference=tmp_path / "reference.safetensors")

The AssertionError's message reads like `burnside compare`: the rows out of tolerance, the
verdict, the first divergence and the diagnoses with their fixes.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from burnside.compare import (
    Comparison,
    Reference,
    Tolerance,
    Tolerances,
    compare_traces,
    open_reference,
)
from burnside.diagnose import diagnose
from burnside.report import render
from burnside.trace import Trace, open_trace

#: Failing rows shown in the message; the rest are counted, and `burnside compare` prints them all.
MAX_ROWS = 25


def assert_parity(a: str | Path | Trace, b: str | Path | Trace, *, reference: str | Path | Reference | None = None,
                  tolerances: Tolerances | float | None = None, only: str | None = None) -> Comparison:
    """Compare trace ``a`` (PyTorch) with trace ``b`` (the burn port); raise AssertionError unless they agree.

    ``reference`` is a float64 reference trace of the same loop (`burnside.reference.record_reference`,
    what `burnside compare --reference` takes): with it, a tensor out of tolerance passes when both
    sides are within rounding of the reference, and a real difference names the side that is off.
    ``tolerances`` is a `Tolerances`, a plain absolute tolerance, or None for the default (1e-6).
    Returns the comparison when everything is within tolerance.
    """
    __tracebackhide__ = True  # pytest shows the message, not these frames
    if isinstance(tolerances, (int, float)):
        tolerances = Tolerances(Tolerance(atol=float(tolerances)))
    trace_a = a if isinstance(a, Trace) else open_trace(a)
    trace_b = b if isinstance(b, Trace) else open_trace(b)
    judge_by = reference if isinstance(reference, Reference) or reference is None else open_reference(reference)
    comparison = compare_traces(trace_a, trace_b, tolerances, only, reference=judge_by)
    if comparison.passed:
        return comparison
    raise AssertionError(_failure_message(comparison))


def _failure_message(comparison: Comparison) -> str:
    """The report `burnside compare` prints, with only the rows that fail (the others are noise here)."""
    console = Console(file=io.StringIO(), width=200, color_system=None, soft_wrap=True)
    render(comparison, diagnose(comparison), console, failing_rows=MAX_ROWS)
    return f"{comparison.b.path} does not train like {comparison.a.path}:\n" + console.file.getvalue().rstrip("\n")

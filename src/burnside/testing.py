"""Parity checks inside a user's own test suite: `assert_parity(torch_trace, burn_trace)`.

    from burnside.testing import assert_parity

    def test_my_port_trains_like_pytorch(tmp_path):
        ...  # record both sides
        assert_parity(tmp_path / "torch.safetensors", tmp_path / "burn.safetensors")

The AssertionError's message reads like `burnside compare`: the rows out of tolerance, the
verdict, the first divergence and the diagnoses with their fixes.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from burnside.compare import Comparison, Tolerance, Tolerances, compare_traces
from burnside.diagnose import diagnose
from burnside.report import render
from burnside.trace import Trace, open_trace


def assert_parity(a: str | Path | Trace, b: str | Path | Trace, *, tolerances: Tolerances | float | None = None,
                  only: str | None = None) -> Comparison:
    """Compare trace ``a`` (PyTorch) with trace ``b`` (the burn port); raise AssertionError unless they agree.

    ``tolerances`` is a `Tolerances`, a plain absolute tolerance, or None for the default (1e-6).
    Returns the comparison when everything is within tolerance.
    """
    if isinstance(tolerances, (int, float)):
        tolerances = Tolerances(Tolerance(atol=float(tolerances)))
    trace_a = a if isinstance(a, Trace) else open_trace(a)
    trace_b = b if isinstance(b, Trace) else open_trace(b)
    comparison = compare_traces(trace_a, trace_b, tolerances, only)
    if comparison.passed:
        return comparison
    diagnoses = diagnose(comparison)
    console = Console(file=io.StringIO(), width=200, color_system=None, soft_wrap=True)
    render(comparison, diagnoses, console)
    lines = console.file.getvalue().splitlines()
    # Rows within tolerance are noise in a failure message: keep the rest as compare prints it.
    kept = [line for line in lines if not (" n=" in line and " out=0" in line and not line.endswith("FAIL"))]
    raise AssertionError(f"{trace_b.path} does not train like {trace_a.path}:\n" + "\n".join(kept))

"""Parity checks inside a user's own test suite: `assert_parity(burn_trace, torch_trace, reference=...)`.

    from burnside.testing import assert_parity

    def test_my_port_trains_like_pytorch(tmp_path):
        ...  # record both sides, and the float64 reference (burnside.reference.record_reference)
        assert_parity(tmp_path / "burn.safetensors", tmp_path / "torch.safetensors",
                      reference=tmp_path / "reference.safetensors")

As with `numpy.testing.assert_allclose(actual, expected)`, the first argument is what is checked (the
burn port's trace) and the second what it should match (the PyTorch trace). The AssertionError's
message reads like `burnside compare`: the first line names the burn trace that does not train like
the PyTorch one, then the rows out of tolerance, the verdict, the first divergence and the
diagnoses with their fixes.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from burnside.compare import Comparison, Reference, Tolerance, Tolerances
from burnside.diagnose import Diagnosis, diagnose
from burnside.pipeline import compare_with_evidence
from burnside.report import render
from burnside.trace import Trace

#: Failing rows shown in the message; the rest are counted, and `burnside compare` prints them all.
MAX_ROWS = 25


def assert_parity(actual: str | Path | Trace, expected: str | Path | Trace, *,
                  reference: str | Path | Reference | None = None, tolerances: Tolerances | float | None = None,
                  only: str | None = None) -> Comparison:
    """Check trace ``actual`` (the burn port) against trace ``expected`` (PyTorch); raise AssertionError
    unless they agree.

    ``reference`` is a float64 reference trace of the same loop (`burnside.reference.record_reference`,
    what `burnside compare --reference` takes): with it, a tensor out of tolerance passes when both
    sides are within rounding of the reference, and a real difference names the side that is off.
    ``tolerances`` is a `Tolerances`, a plain absolute tolerance, or None for the default (1e-6).
    Returns the comparison (A the expected PyTorch trace, B the actual burn one, as `burnside compare
    EXPECTED ACTUAL` prints it) when everything is within tolerance.
    """
    __tracebackhide__ = True  # pytest shows the message, not these frames
    comparison = compare_with_evidence(expected, actual, tolerances_of(tolerances), only, reference=reference)
    if comparison.passed:
        return comparison
    raise AssertionError(failure_message(comparison, diagnose(comparison)))


def tolerances_of(tolerances: Tolerances | float | None) -> Tolerances | None:
    """A plain number as the absolute tolerance of every tensor; a `Tolerances` or None as given."""
    if isinstance(tolerances, (int, float)):
        return Tolerances(Tolerance(atol=float(tolerances)))
    return tolerances


def failure_message(comparison: Comparison, diagnoses: list[Diagnosis]) -> str:
    """The report `burnside compare` prints, with only the rows that fail (the others are noise here),
    under a line naming the actual (B, burn) trace and the expected (A, PyTorch) one."""
    console = Console(file=io.StringIO(), width=200, color_system=None, soft_wrap=True)
    render(comparison, diagnoses, console, failing_rows=MAX_ROWS)
    return f"{comparison.b.path} does not train like {comparison.a.path}:\n" + console.file.getvalue().rstrip("\n")

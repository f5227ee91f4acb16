"""A tensor compared by its statistics (trace format version 3): a `StatisticsRow` and how it is judged.

A trace may hold a tensor as its statistics only (`burnside.trace.statistics`). Where both traces hold a name
and at least one holds it as statistics, the full side's statistics are computed from its tensor (chunked,
`statistics_of`) and the two are judged as statistics:

- bit-identical when the hashes agree (passes);
- without a float64 reference: out of tolerance when the lower bound on max|A - B| the statistics give exceeds
  the most the tolerance allows any element (the row fails: the element at max|A - B| is proven beyond it), and
  otherwise not judged: consistent with the tolerance, which statistics cannot show;
- with a reference: not judged unless bit-identical. Statistics cannot tell rounding from a bug, and a
  reference judges an element's distance, which statistics do not hold; never a failure by itself.

Statistics rows live in `Comparison.statistics`, never in `Comparison.rows`: every rule and forensics sees only
full tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from burnside.compare.tolerance import Tolerance
from burnside.trace import parse_name
from burnside.trace.statistics import Statistics, lower_bound

#: The verdicts of a statistics row, as the JSON report writes them.
IDENTICAL, OUT_OF_TOLERANCE, NOT_JUDGED = "identical", "out of tolerance", "not judged"

#: The spacing of representable values at a magnitude, by dtype (BF16: float32's widened by its 16 fewer bits).
_SPACING = {"F64": lambda m: float(np.spacing(np.float64(m))), "F32": lambda m: float(np.spacing(np.float32(m))),
            "F16": lambda m: float(np.spacing(np.float16(m))),
            "BF16": lambda m: float(np.spacing(np.float32(m))) * 65536.0}


@dataclass(frozen=True)
class StatisticsRow:
    """One tensor both traces hold, at least one of them as statistics only."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    a: Statistics
    b: Statistics
    #: how each side holds it: "full" (statistics computed from the tensor) or "statistics"
    held_a: str
    held_b: str
    tol: Tolerance
    lower_bound: float  # a lower bound on max|A - B| (0 when bit-identical, inf when non-finite counts differ)
    verdict: str  # IDENTICAL, OUT_OF_TOLERANCE or NOT_JUDGED
    #: the float64 reference's statistics of the tensor, when compare was given one that holds it
    ref: Statistics | None = None

    @property
    def bit_identical(self) -> bool:
        """Same dtype, shape and hash of the stored bytes on both sides."""
        return self.verdict == IDENTICAL

    @property
    def passed(self) -> bool:
        """Not proven out of tolerance (a row not judged passes: nothing was proven against it)."""
        return self.verdict != OUT_OF_TOLERANCE

    @property
    def step(self) -> int | None:
        """The step (a forward trace's batch) of the tensor, None for a name outside the grammar."""
        parsed = parse_name(self.name)
        return parsed.step if parsed is not None else None

    @property
    def allowed(self) -> float:
        """The most the tolerance lets any element differ by: atol + rtol * the larger side's max|x|. An element
        passes at |a - b| <= atol + rtol*|b|; the larger magnitude of the two sides bounds |b| whichever is B."""
        return self.tol.atol + self.tol.rtol * max(self.a.max_abs, self.b.max_abs)

    def ref_bounds(self) -> tuple[float, float] | None:
        """Lower bounds on max|A - R| and max|B - R| from the reference's statistics (display only)."""
        if self.ref is None or self.ref.shape != self.shape:
            return None
        return _values_bound(self.a, self.ref), _values_bound(self.b, self.ref)

    def to_dict(self) -> dict:
        """For `--json`."""
        bounds = self.ref_bounds()
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "bit_identical": self.bit_identical,
                "lower_bound": self.lower_bound, "verdict": self.verdict, "held_a": self.held_a,
                "held_b": self.held_b, "atol": self.tol.atol, "rtol": self.tol.rtol, "ulps": self.tol.ulps,
                "a": self.a.to_json(), "b": self.b.to_json(),
                "reference": self.ref.to_json() if self.ref is not None else None,
                "reference_lower_bounds": list(bounds) if bounds is not None else None}


def _values_bound(x: Statistics, r: Statistics) -> float:
    """`lower_bound` of two tensors' values whatever their dtypes (a side against the float64 reference)."""
    same = Statistics(r.dtype, r.shape, x.mean, x.norm, x.max_abs, x.nonfinite, "")
    return lower_bound(same, r)


def proven_out(a: Statistics, b: Statistics, bound: float, tol: Tolerance) -> bool:
    """Whether the statistics prove some element beyond ``tol``: max|A - B| >= ``bound`` exceeds
    atol + rtol * max|x|, and (with `ulps` set) lies more than ``ulps`` representable values apart.

    ``bound`` inf (one side holds non-finite values the other does not) is proven; NaN (both hold some) is not.
    """
    if math.isnan(bound):
        return False
    if math.isinf(bound):
        return True
    magnitude = max(a.max_abs, b.max_abs)
    if not bound > tol.atol + tol.rtol * magnitude:
        return False
    if tol.ulps is not None:
        # every gap between representable values up to `magnitude` is at most the gap at `magnitude`, so
        # two values |a - b| apart are at least |a - b| / gap representable values apart
        spacing = _SPACING.get(a.dtype)
        if spacing is None or not math.isfinite(magnitude):
            return False
        if not bound / spacing(magnitude) > tol.ulps + 1:
            return False
    return True


def judge_statistics(name: str, a: Statistics, b: Statistics, held_a: str, held_b: str, tol: Tolerance, *,
                     with_reference: bool, ref: Statistics | None = None) -> StatisticsRow:
    """The row of one tensor judged by its statistics (the module docstring says how)."""
    if a.same_bits(b):
        bound, verdict = 0.0, IDENTICAL
    else:
        bound = lower_bound(a, b)
        verdict = OUT_OF_TOLERANCE if not with_reference and proven_out(a, b, bound, tol) else NOT_JUDGED
    return StatisticsRow(name, a.dtype, a.shape, a, b, held_a, held_b, tol, bound, verdict, ref)


def side_statistics(trace, name: str) -> tuple[Statistics, str]:
    """One side's statistics of ``name`` and how the side holds it: recorded ("statistics"), or computed from its
    full tensor in chunks ("full", `Trace.statistics_of`)."""
    return trace.statistics_of(name), "statistics" if name in trace.statistics else "full"

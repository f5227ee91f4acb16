"""The rows of a comparison: `TensorRow` (one tensor compared on both sides), `StructureProblem` (a shape or
dtype that differs), and the tensors a trace may hold without the other (`is_optional`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from burnside.compare.output_metrics import OutputMetrics
from burnside.compare.referee import RefStats
from burnside.compare.tensor_diff import ElementStats
from burnside.compare.tolerance import Tolerance
from burnside.trace import parse_name


@dataclass(frozen=True)
class TensorRow:
    """One tensor compared on both sides."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stats: ElementStats
    tol: Tolerance
    ref: RefStats | None = None  # both sides' distances to the float64 reference, when given
    #: a forward trace's output: relative error, cosine similarity, top-1 agreement (`output_metrics`)
    metrics: OutputMetrics | None = None
    #: without a reference, the rounding a float32 sum of the row's terms may carry on the two sides together
    #: (`rounding.sum_half_ulps` of its scale, twice), where that exceeds the plain floor and the row is out of
    #: tolerance; 0 otherwise
    sum_band: float = 0.0
    #: the float32 terms each element sums (`summed_terms`; 1 for most tensors)
    terms: int = 1

    @property
    def passed(self) -> bool:
        """Every element within tolerance, or (with a reference) both sides within rounding of it, or (without one)
        the row a float32 sum of many terms within the rounding such a sum carries (`sum_band`)."""
        return self.stats.out_of_tol == 0 or (self.ref is not None and self.ref.noise) or self.within_sum_rounding

    @property
    def within_sum_rounding(self) -> bool:
        """Without a reference, out of tolerance by no more than the rounding of a float32 sum of its terms."""
        return (self.ref is None and self.sum_band > 0 and self.stats.out_of_tol > 0
                and self.stats.nonfinite_a_only == self.stats.nonfinite_b_only == self.stats.nan_one_side == 0
                and self.stats.max_abs <= self.sum_band)

    @property
    def stage(self) -> str | None:
        """The pipeline stage of this tensor (None for names outside the v1 grammar)."""
        parsed = parse_name(self.name)
        return parsed.stage if parsed else None

    @property
    def worst_index(self) -> tuple[int, ...] | None:
        """Multi-dimensional index of the worst element."""
        if self.stats.worst_index is None:
            return None
        if not self.shape:
            return ()
        return tuple(int(i) for i in np.unravel_index(self.stats.worst_index, self.shape))


@dataclass(frozen=True)
class StructureProblem:
    """A tensor present on both sides whose shape or dtype differs."""

    name: str
    what: str  # "shape" or "dtype"
    a: str
    b: str
    transposed: bool = False  # a 2-D shape that is the other side's transpose (D007)

    @property
    def hint(self) -> str | None:
        """What a transposed shape means, for the report."""
        if not self.transposed:
            return None
        return ("the shapes are transposes: one side stored a Linear weight in burn's [in, out] layout; "
                "the burn recorder must write PyTorch's [out, in]")


def is_optional(name: str) -> bool:
    """A tensor a trace may hold without the other: a layer's output or input (what PyTorch fed a module,
    which a port reads from the init file rather than records), what the loss function inside PyTorch's loss was
    given, or a buffer burn does not keep."""
    parsed = parse_name(name)
    if parsed is None:
        return False
    return parsed.stage in ("activations", "layer_inputs", "loss_inputs") or (parsed.stage == "buffers"
                                             and parsed.rest.rsplit(".", 1)[-1] == "num_batches_tracked")


def is_shared_start(name: str) -> bool:
    """Every input and step 0's parameters: what both sides must hold bit-identically before anything runs."""
    parsed = parse_name(name)
    return parsed is not None and parsed.is_shared_start

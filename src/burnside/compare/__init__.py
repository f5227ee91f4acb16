"""Compare two traces tensor by tensor: absolute error, ULPs, structure, earliest divergence."""

from burnside.compare.comparison import (
    Comparison,
    StructureProblem,
    TensorRow,
    compare_traces,
)
from burnside.compare.layers import LayerForensics
from burnside.compare.reference import (
    FrameworkDifference,
    Reference,
    RefStats,
    open_reference,
)
from burnside.compare.summary import TraceSummary
from burnside.compare.tensor_diff import (
    ElementStats,
    diff_arrays,
    float_ulps,
    ulp_distance,
)
from burnside.compare.tolerance import Tolerance, Tolerances, load_tolerances

__all__ = [
    "Comparison",
    "ElementStats",
    "FrameworkDifference",
    "LayerForensics",
    "RefStats",
    "Reference",
    "StructureProblem",
    "TensorRow",
    "Tolerance",
    "Tolerances",
    "TraceSummary",
    "compare_traces",
    "diff_arrays",
    "float_ulps",
    "load_tolerances",
    "open_reference",
    "ulp_distance",
]

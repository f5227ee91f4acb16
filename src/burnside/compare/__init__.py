"""Compare two traces tensor by tensor: absolute error, ULPs, structure, earliest divergence; with a
float64 reference, the noise verdict."""

from burnside.compare.comparison import Comparison
from burnside.compare.observer import Observer
from burnside.compare.referee import FrameworkDifference, RefStats
from burnside.compare.reference_file import Reference, open_reference
from burnside.compare.rows import StructureProblem, TensorRow
from burnside.compare.start_checks import check_start, refuse_reference, refuse_statistics_reference, same_setting
from burnside.compare.statistics_rows import StatisticsRow
from burnside.compare.summary import TraceSummary
from burnside.compare.tensor_diff import (
    ElementStats,
    diff_arrays,
    float_ulps,
    ulp_distance,
)
from burnside.compare.tolerance import Tolerance, Tolerances, load_tolerances
from burnside.compare.traces import compare_traces
from burnside.compare.zero_gradients import ZeroGradient

__all__ = [
    "Comparison",
    "ElementStats",
    "FrameworkDifference",
    "Observer",
    "RefStats",
    "StatisticsRow",
    "Reference",
    "StructureProblem",
    "TensorRow",
    "Tolerance",
    "Tolerances",
    "TraceSummary",
    "ZeroGradient",
    "check_start",
    "compare_traces",
    "diff_arrays",
    "float_ulps",
    "load_tolerances",
    "open_reference",
    "refuse_reference",
    "refuse_statistics_reference",
    "same_setting",
    "ulp_distance",
]

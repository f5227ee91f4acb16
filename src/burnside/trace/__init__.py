"""The trace: the one contract between the PyTorch side and the burn side (docs/trace-format.md)."""

from burnside.trace.names import STAGES, TensorName, parse_name, tensor_name
from burnside.trace.statistics import Statistics, lower_bound, statistics_of
from burnside.trace.trace import (
    FORMAT_VERSION,
    TensorInfo,
    Trace,
    convert_trace,
    open_trace,
    write_trace,
)

__all__ = [
    "FORMAT_VERSION",
    "STAGES",
    "Statistics",
    "TensorInfo",
    "TensorName",
    "Trace",
    "convert_trace",
    "lower_bound",
    "open_trace",
    "parse_name",
    "statistics_of",
    "tensor_name",
    "write_trace",
]

"""The float64 reference as compare opens it: the trace `burnside.reference.record_reference` wrote,
and the variants its metadata names (each next to it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from burnside.errors import TraceError
from burnside.trace import Trace, open_trace


@dataclass
class Reference:
    """An opened float64 reference trace and the variants its metadata names."""

    trace: Trace
    variants: dict[str, Trace] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """The reference trace's path."""
        return self.trace.path


def open_reference(path: str | Path) -> Reference:
    """Open a reference recorded by `burnside.reference.record_reference`, with its variants."""
    trace = open_trace(path)
    if trace.metadata.get("reference") != "float64":
        raise TraceError(f"{trace.path} is not a float64 reference trace; record one with "
                         "burnside.reference.record_reference (or `burnside run` without --no-reference)")
    variants = {}
    for key, value in trace.metadata.items():
        if key.startswith("variant.") and isinstance(value, str):
            variant_path = trace.path.with_name(value)
            if not variant_path.is_file():
                raise TraceError(f"{trace.path} names its variant {value}, which is not next to it; "
                                 "keep the reference's files together")
            variants[key.removeprefix("variant.")] = open_trace(variant_path)
    return Reference(trace, variants)

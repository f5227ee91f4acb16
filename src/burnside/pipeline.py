"""Record both sides and compare them: the one pipeline behind `run`, `check`, `compare`, the experiments,
`burnside.testing` and the pytest plugin.

    refuse / check the reference -> record PyTorch -> build and run burn -> compare (+ forensics) -> diagnose

A reference is refused as a side and checked against the PyTorch trace's start once, here, before
the port is built (`_judge_by`); compare then trusts it. Forensics observes compare's one pass over the
traces and returns the evidence the rules read, handed to them with the comparison (`compare_with_evidence`);
it never changes the verdict, which is compare's (`burnside.compare.compare_traces`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from burnside.compare import (
    Comparison,
    Reference,
    Tolerances,
    check_start,
    compare_traces,
    open_reference,
    refuse_reference,
    refuse_statistics_reference,
)
from burnside.diagnose import Diagnosis, diagnose
from burnside.forensics import ComparisonWithEvidence, EvidenceGatherer
from burnside.trace import Trace, open_trace

if TYPE_CHECKING:
    from burnside.progress import TensorProgress

#: Writes the PyTorch side's trace at the path it is given and returns it.
TorchSide = Callable[[Path], Path]
#: Writes the float64 reference at the path it is given and returns it.
ReferenceSide = Callable[[Path], Path]
#: Writes the burn side's trace at the first path, starting from the PyTorch trace at the second.
BurnSide = Callable[[Path, Path], Path]

#: How to give a reference that was refused as a side.
_AS_SIDE_FIX = "pass it as --reference and give A and B the two sides' traces"


@dataclass
class Parity:
    """Both sides' traces, their comparison and what the diagnosis named."""

    torch_trace: Path
    burn_trace: Path
    comparison: Comparison
    diagnoses: list[Diagnosis]
    reference_trace: Path | None = None

    @property
    def passed(self) -> bool:
        """Every tensor within tolerance, same structure, bit-identical start."""
        return self.comparison.passed


def _trace(trace: str | Path | Trace) -> Trace:
    return trace if isinstance(trace, Trace) else open_trace(trace)


def _judge_by(reference: str | Path | Reference, torch_trace: Trace) -> Reference:
    """Open ``reference`` (unless it is open already) and check it starts where ``torch_trace`` does:
    the one check of a reference, before anything is built or compared."""
    opened = reference if isinstance(reference, Reference) else open_reference(reference)
    check_start(torch_trace, opened)
    return opened


def compare_with_evidence(torch: str | Path | Trace, burn: str | Path | Trace, tolerances: Tolerances | None = None,
                          only: str | Sequence[str] | None = None, reference: str | Path | Reference | None = None,
                          progress: TensorProgress | None = None,
                          skip: str | Sequence[str] | None = None) -> ComparisonWithEvidence:
    """Compare trace ``torch`` (A, usually PyTorch) with trace ``burn`` (B, usually the burn port), with the
    diagnosis evidence gathered in the same pass (`burnside.forensics`): what `burnside compare` runs.

    A float64 reference given as either side is refused; ``reference`` (a path or an opened
    `Reference`) is checked to start where A does, and refused when it holds only statistics of a tensor both
    sides hold in full; then each tensor is judged by it.
    """
    trace_a, trace_b = _trace(torch), _trace(burn)
    if reference is not None and not isinstance(reference, Reference):
        reference = open_reference(reference)  # a reference missing its variant says so before anything else
    for side, trace in (("A", trace_a), ("B", trace_b)):
        refuse_reference(trace, f"a side to compare ({side})", _AS_SIDE_FIX)
    judge_by = _judge_by(reference, trace_a) if reference is not None else None
    if judge_by is not None:
        refuse_statistics_reference(trace_a, trace_b, judge_by)
    return _compare(trace_a, trace_b, tolerances, only, judge_by, progress, skip)


def _compare(a: Trace, b: Trace, tolerances: Tolerances | None, only: str | Sequence[str] | None,
             reference: Reference | None, progress: TensorProgress | None,
             skip: str | Sequence[str] | None) -> ComparisonWithEvidence:
    """compare's verdict, with the evidence forensics gathered from the same pass."""
    gatherer = EvidenceGatherer()
    comparison = compare_traces(a, b, tolerances, only, reference=reference, progress=progress, observer=gatherer,
                                skip=skip)
    return ComparisonWithEvidence.of(comparison, gatherer.evidence)


def record_and_compare(torch: Path | TorchSide, burn: BurnSide, *, torch_out: Path, burn_out: Path,
                       tolerances: Tolerances | None = None, only: str | Sequence[str] | None = None,
                       reference: Path | ReferenceSide | None = None, reference_out: Path | None = None,
                       progress: TensorProgress | None = None, skip: str | Sequence[str] | None = None) -> Parity:
    """Record the PyTorch side (or take its existing trace), then the burn side from it, and compare.

    ``torch`` is an existing trace or a recorder; ``burn`` gets its output path and the PyTorch
    trace (a port starts from that trace's step-0 inputs and params). ``reference`` is an existing
    float64 reference trace or its recorder (written at ``reference_out``); with it, each tensor is
    also judged by both sides' distances to it (docs/compare.md). An existing reference is checked
    before the burn side is built and run, a recorded one once it is written. Outputs are written
    atomically by the recorders; a failure on either side raises a BurnsideError. ``progress``
    is told the comparison's tensors (`compare_traces`); the sides report their own steps.
    """
    torch_trace = torch if isinstance(torch, Path) else torch(torch_out)
    trace_a = open_trace(torch_trace)
    # before the port builds and runs: from a reference's start it would load float64 weights
    refuse_reference(trace_a, "the PyTorch trace (burnside.torch.record)",
                     "pass it as --reference and the trace burnside.torch.record wrote as --torch-trace")
    judge_by = None
    if isinstance(reference, Path):
        # a reference that is no reference, or of another start, is refused before the port builds and runs
        judge_by = _judge_by(reference, trace_a)
    burn_trace = burn(burn_out, torch_trace)
    if reference is not None and not isinstance(reference, Path):
        if reference_out is None:
            raise ValueError("a reference recorder needs reference_out")
        reference = reference(reference_out)
        judge_by = _judge_by(reference, trace_a)
    trace_b = open_trace(burn_trace)
    refuse_reference(trace_b, "a side to compare (B)", _AS_SIDE_FIX)
    if judge_by is not None:
        refuse_statistics_reference(trace_a, trace_b, judge_by)
    comparison = _compare(trace_a, trace_b, tolerances, only, judge_by, progress, skip)
    return Parity(torch_trace, burn_trace, comparison, diagnose(comparison), reference)

"""Record both sides and compare them: the one pipeline behind `run`, `check` and the experiments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from burnside.compare import Comparison, Tolerances, compare_traces, open_reference
from burnside.compare.comparison import refuse_reference
from burnside.compare.reference import check_start
from burnside.diagnose import Diagnosis, diagnose
from burnside.trace import open_trace

if TYPE_CHECKING:
    from burnside.progress import TensorProgress

#: Writes the PyTorch side's trace at the path it is given and returns it.
TorchSide = Callable[[Path], Path]
#: Writes the float64 reference at the path it is given and returns it.
ReferenceSide = Callable[[Path], Path]
#: Writes the burn side's trace at the first path, starting from the PyTorch trace at the second.
BurnSide = Callable[[Path, Path], Path]


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


def record_and_compare(torch: Path | TorchSide, burn: BurnSide, *, torch_out: Path, burn_out: Path,
                       tolerances: Tolerances | None = None, only: str | None = None,
                       reference: Path | ReferenceSide | None = None, reference_out: Path | None = None,
                       progress: TensorProgress | None = None) -> Parity:
    """Record the PyTorch side (or take its existing trace), then the burn side from it, and compare.

    ``torch`` is an existing trace or a recorder; ``burn`` gets its output path and the PyTorch
    trace (a port starts from that trace's step-0 inputs and params). ``reference`` is an existing
    float64 reference trace or its recorder (written at ``reference_out``); with it, each tensor is
    also judged by both sides' distances to it (docs/compare.md). Outputs are written
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
        judge_by = open_reference(reference)
        check_start(trace_a, judge_by)
    burn_trace = burn(burn_out, torch_trace)
    if reference is not None and not isinstance(reference, Path):
        if reference_out is None:
            raise ValueError("a reference recorder needs reference_out")
        reference = reference(reference_out)
        judge_by = open_reference(reference)
    comparison = compare_traces(trace_a, open_trace(burn_trace), tolerances, only, reference=judge_by,
                                progress=progress)
    return Parity(torch_trace, burn_trace, comparison, diagnose(comparison), reference)

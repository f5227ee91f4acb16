"""Record both sides and compare them: the one pipeline behind `run`, `check` and the experiments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from burnside.compare import Comparison, Tolerances, compare_traces
from burnside.diagnose import Diagnosis, diagnose
from burnside.trace import open_trace

#: Writes the PyTorch side's trace at the path it is given and returns it.
TorchSide = Callable[[Path], Path]
#: Writes the burn side's trace at the first path, starting from the PyTorch trace at the second.
BurnSide = Callable[[Path, Path], Path]


@dataclass
class Parity:
    """Both sides' traces, their comparison and what the diagnosis named."""

    torch_trace: Path
    burn_trace: Path
    comparison: Comparison
    diagnoses: list[Diagnosis]

    @property
    def passed(self) -> bool:
        """Every tensor within tolerance, same structure, bit-identical start."""
        return self.comparison.passed


def record_and_compare(torch: Path | TorchSide, burn: BurnSide, *, torch_out: Path, burn_out: Path,
                       tolerances: Tolerances | None = None, only: str | None = None) -> Parity:
    """Record the PyTorch side (or take its existing trace), then the burn side from it, and compare.

    ``torch`` is an existing trace or a recorder; ``burn`` gets its output path and the PyTorch
    trace (a port starts from that trace's step-0 inputs and params). Outputs are written
    atomically by the recorders; a failure on either side raises a BurnsideError.
    """
    torch_trace = torch if isinstance(torch, Path) else torch(torch_out)
    burn_trace = burn(burn_out, torch_trace)
    comparison = compare_traces(open_trace(torch_trace), open_trace(burn_trace), tolerances, only)
    return Parity(torch_trace, burn_trace, comparison, diagnose(comparison))

"""`Forensics`: the collector compare's pass hands its open traces to (`burnside.compare.Collector`).

Before the pass it replays each side's optimizer; after it, while the traces are still open, it
measures the layer at the first divergence and looks for a repeated batch. Each reads only the
tensors it needs, once: no second pass over the traces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnside.forensics.evidence import Evidence
from burnside.forensics.layers import measure_layer
from burnside.forensics.optimizer import measure_optimizer
from burnside.forensics.repeated_batch import find_repeated_batch
from burnside.trace import Trace

if TYPE_CHECKING:
    from burnside.compare.comparison import Comparison


class Forensics:
    """Gathers a comparison's `Evidence` from the traces compare has open, and hands it to the comparison."""

    def __init__(self) -> None:
        self.evidence = Evidence()

    def start(self, a: Trace, b: Trace) -> None:
        """Before the first tensor: each side's optimizer, replayed from its own tensors."""
        self.evidence.optimizer_a = measure_optimizer(a)
        self.evidence.optimizer_b = measure_optimizer(b)

    def finish(self, a: Trace, b: Trace, comparison: Comparison) -> None:
        """After the last tensor: a repeated batch, the layer at the first divergence (one layer at one step)."""
        self.evidence.repeated_batch = find_repeated_batch(a, b, [r.name for r in comparison.start_mismatch])
        first = comparison.first_divergence
        if first is not None:
            self.evidence.layer = measure_layer(a, b, first.name)
        comparison.evidence = self.evidence

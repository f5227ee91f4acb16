"""`Forensics`: the collector compare's pass hands its open traces to (`burnside.compare.Collector`).

Before the pass it replays each side's optimizer; after it, while the traces are still open, it
measures the layer at the first divergence and looks for a repeated batch. Each reads only the
tensors it needs, once: no second pass over the traces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnside.forensics.accumulation import measure_accumulation
from burnside.forensics.dropout import dropout_input, measure_dropout
from burnside.forensics.evidence import Evidence
from burnside.forensics.layers import measure_layer
from burnside.forensics.loss_fit import measure_loss
from burnside.forensics.optimizer import measure_optimizer
from burnside.forensics.repeated_batch import find_repeated_batch
from burnside.trace import Trace, parse_name

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
        """After the last tensor: a repeated batch, the layer at the first divergence (one layer at one step),
        a dropout on for one side there, and each side's loss when the loss is the first to differ."""
        self.evidence.repeated_batch = find_repeated_batch(a, b, [r.name for r in comparison.start_mismatch])
        first = first_layer_divergence(a, comparison)
        if first is not None:
            self.evidence.layer = measure_layer(a, b, first)
            self.evidence.dropout = measure_dropout(a, b, first)
            self.evidence.dropout_input = dropout_input(a, first)
        self.evidence.loss = measure_loss(a, b, comparison)
        self.evidence.accumulation = measure_accumulation(a, b)
        comparison.evidence = self.evidence


def first_layer_divergence(a: Trace, comparison: Comparison) -> str | None:
    """The earliest tensor where the two sides part: the first row out of tolerance, or an earlier layer
    output whose shape differs (a convolution's stride or padding: nothing after it compares)."""
    first = comparison.first_divergence
    candidates = [first.name] if first is not None else []
    candidates += [p.name for p in comparison.structure if p.what == "shape"
                   and (parsed := parse_name(p.name)) is not None and parsed.stage == "activations"]
    if not candidates:
        return None
    position = {name: i for i, name in enumerate(a.names)}
    return min(candidates, key=lambda name: position.get(name, len(position)))

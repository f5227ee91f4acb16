"""`EvidenceGatherer`: the observer compare's pass hands its open traces to (`burnside.compare.Observer`).

Before the pass it replays each side's optimizer; after it, while the traces are still open, it
measures the layer at the first divergence and looks for a repeated batch. Each reads only the
tensors it needs, once: no second pass over the traces. It changes nothing compare found: the pipeline
(`burnside.pipeline`) hands its `Evidence` to the rules with the comparison (`ComparisonWithEvidence`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnside.forensics.accumulation import measure_accumulation
from burnside.forensics.decode_attention import measure_decode_attention
from burnside.forensics.dropout import dropout_input, measure_dropout
from burnside.forensics.evidence import Evidence
from burnside.compare.layers.settings import measure_layer
from burnside.forensics.lookups import measure_lookup
from burnside.forensics.loss_fit import measure_loss
from burnside.forensics.optimizer import measure_optimizer
from burnside.forensics.positions import measure_positions, measure_rope_form
from burnside.forensics.reads import measure_reads
from burnside.forensics.transformer_layer import KINDS as MASKED_KINDS, LayerMasks, measure_masks
from burnside.forensics.repeated_batch import find_repeated_batch
from burnside.trace import Trace, parse_name

if TYPE_CHECKING:
    from burnside.compare.comparison import Comparison


class EvidenceGatherer:
    """Gathers a comparison's `Evidence` from the traces compare has open."""

    def __init__(self) -> None:
        self.evidence = Evidence()

    def start(self, a: Trace, b: Trace) -> None:
        """Before the first tensor: each side's optimizer, replayed from its own tensors."""
        self.evidence.optimizer_a = measure_optimizer(a)
        self.evidence.optimizer_b = measure_optimizer(b)

    def finish(self, a: Trace, b: Trace, comparison: Comparison) -> None:
        """After the last tensor: a repeated batch, the layer at the first divergence (one layer at one step) and
        the ids it looked up if it is an embedding, a dropout on for one side there, and each side's loss when the
        loss is the first to differ."""
        self.evidence.repeated_batch = find_repeated_batch(a, b, [r.name for r in comparison.start_mismatch])
        first = first_layer_divergence(a, comparison)
        if first is not None:
            self.evidence.layer = measure_layer(a, b, first)
            if self.evidence.layer is None or not self.evidence.layer.differing():
                self.evidence.reads = measure_reads(a, b, first)  # the layer's own settings agree: what it read
                self.evidence.masks = _masks(a, b, first)
            self.evidence.lookup = measure_lookup(a, b, first)
            self.evidence.positions = measure_positions(a, b, first)
            if self.evidence.positions is None:
                self.evidence.rope = measure_rope_form(a, b, first)
            if self.evidence.positions is None and self.evidence.rope is None:
                self.evidence.decode = measure_decode_attention(a, b, first)
            self.evidence.dropout = measure_dropout(a, b, first)
            self.evidence.dropout_input = dropout_input(a, first)
        self.evidence.loss = measure_loss(a, b, comparison)
        self.evidence.accumulation = measure_accumulation(a, b)


def _masks(a: Trace, b: Trace, first: str) -> LayerMasks | None:
    """The masks of PyTorch's attention layer whose output ``first`` is (`transformer_layer`), or None."""
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or parsed.stage != "activations" or not isinstance(modules, dict):
        return None
    kind = modules.get(parsed.rest)
    if kind not in MASKED_KINDS:
        return None
    return measure_masks(a, b, first, parsed.rest, kind, parsed.step)


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

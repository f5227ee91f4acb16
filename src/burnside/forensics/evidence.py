"""`Evidence`: what the diagnosis rules need beyond the compared rows, gathered once from the traces, and
`ComparisonWithEvidence`, a comparison with it: what the pipeline hands the rules and the reports."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from burnside.compare import Comparison
from burnside.forensics.accumulation import AccumulationFit
from burnside.forensics.decode_attention import DecodeAttention
from burnside.forensics.dropout import DropoutForensics, DropoutInput
from burnside.compare.layers.settings import LayerForensics
from burnside.forensics.lookups import Lookup
from burnside.forensics.loss_fit import LossFit
from burnside.forensics.optimizer import OptimizerForensics
from burnside.forensics.positions import Positions, RopeForm
from burnside.forensics.reads import LayerReads
from burnside.forensics.repeated_batch import RepeatedBatch
from burnside.forensics.transformer_layer import LayerMasks


@dataclass
class Evidence:
    """The forensics of one comparison: each side's optimizer as its updates show it, the settings of
    the layer at the first divergence, a dropout on for one side there, and a side that fed step 0's
    batch again."""

    #: the optimizer each trace's own updates show (replay and measured settings)
    optimizer_a: OptimizerForensics | None = None
    optimizer_b: OptimizerForensics | None = None
    #: the settings of the layer at the first divergence, measured on each side (BatchNorm, LayerNorm,
    #: GELU, LSTM/GRU)
    layer: LayerForensics | None = None
    #: what B's layer at the first divergence read, re-run on A's recorded tensors (an activation or residual
    #: left out, added or of another form before it)
    reads: LayerReads | None = None
    #: the masks (and a cross-attention's memory) of PyTorch's attention layer at the first divergence, and the one
    #: B ran otherwise (`transformer_layer`)
    masks: LayerMasks | None = None
    #: the positions each side's rotary embedding at the first divergence computed its table for
    positions: Positions | None = None
    #: each side's RoPE layout and theta there, where its rows are of no position A recorded
    rope: RopeForm | None = None
    #: the one change (grouped-query heads' order, the mask or the cache at a decode step) that reproduces B's output
    #: of a decoder attention there, re-run from each side's recorded projections
    decode: DecodeAttention | None = None
    #: the ids each side's embedding at the first divergence looked up, read back from its output rows
    lookup: Lookup | None = None
    #: one side fed step 0's batch again where the other fed another (D006 says which steps)
    repeated_batch: RepeatedBatch | None = None
    #: a dropout on for one side only, at the first divergence (one side's values the other's zeroed or scaled)
    dropout: DropoutForensics | None = None
    #: A's recorded input of the dropout at the first divergence, and whether it is the activation before it
    dropout_input: DropoutInput | None = None
    #: the loss each side computed, from its own logits and targets, when the loss is the first to differ (D017)
    loss: LossFit | None = None
    #: two accumulating traces' step-0 loss and gradient ratios (D018)
    accumulation: AccumulationFit | None = None

    def optimizer(self, side: str) -> OptimizerForensics | None:
        """Side "a"'s or "b"'s optimizer forensics."""
        return self.optimizer_a if side == "a" else self.optimizer_b


@dataclass
class ComparisonWithEvidence(Comparison):
    """A comparison and the evidence gathered from the same open traces (`EvidenceGatherer`): what the pipeline
    (`burnside.pipeline.compare_with_evidence`) returns. The verdict is the comparison's, unchanged: evidence only
    tells the rules why."""

    evidence: Evidence = field(default_factory=Evidence)

    @classmethod
    def of(cls, comparison: Comparison, evidence: Evidence) -> ComparisonWithEvidence:
        """``comparison`` (the same rows, lists and figures, not copies) with ``evidence``."""
        return cls(**{f.name: getattr(comparison, f.name) for f in fields(Comparison)}, evidence=evidence)


def evidence_of(comparison: Comparison) -> Evidence:
    """The evidence gathered with ``comparison``; empty when it was compared without forensics
    (`burnside.compare.compare_traces` on its own)."""
    return comparison.evidence if isinstance(comparison, ComparisonWithEvidence) else Evidence()

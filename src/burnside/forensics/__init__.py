"""Forensics: the evidence the diagnosis rules need, gathered once from the traces compare has open.

compare -> forensics -> diagnose: `Forensics` is the collector `burnside.compare.compare_traces`
calls before and after its one pass (`burnside.parity.compare_with_evidence` plugs it in), and the
rules read the `Evidence` it leaves on the comparison (`evidence_of`).
"""

from burnside.forensics.collector import Forensics
from burnside.forensics.evidence import Evidence, evidence_of
from burnside.forensics.layers import LayerForensics, measure_layer
from burnside.forensics.optimizer import OptimizerForensics, group_settings, measure_optimizer
from burnside.forensics.repeated_batch import RepeatedBatch

__all__ = [
    "Evidence",
    "Forensics",
    "LayerForensics",
    "OptimizerForensics",
    "RepeatedBatch",
    "evidence_of",
    "group_settings",
    "measure_layer",
    "measure_optimizer",
]

"""Forensics: the evidence the diagnosis rules need, gathered once from the traces compare has open.

compare -> forensics -> diagnose: `EvidenceGatherer` is the observer `burnside.compare.compare_traces`
tells before and after its one pass (`burnside.pipeline.compare_with_evidence` plugs it in); the pipeline
hands the rules the comparison with the `Evidence` it gathered (`ComparisonWithEvidence`, read with
`evidence_of`). Forensics never changes the comparison: its verdict is compare's.
"""

from burnside.forensics.evidence import ComparisonWithEvidence, Evidence, evidence_of
from burnside.forensics.gatherer import EvidenceGatherer
from burnside.forensics.optimizer import OptimizerForensics, group_settings, measure_optimizer
from burnside.forensics.repeated_batch import RepeatedBatch

__all__ = [
    "ComparisonWithEvidence",
    "Evidence",
    "EvidenceGatherer",
    "OptimizerForensics",
    "RepeatedBatch",
    "evidence_of",
    "group_settings",
    "measure_optimizer",
]

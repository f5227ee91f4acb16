"""The comparison as JSON (`--json`): strict JSON, non-finite numbers as strings like the trace format."""

from __future__ import annotations

import json
import math

from burnside.compare import Comparison, TensorRow
from burnside.compare.pairing import pair_renamed
from burnside.diagnose import Diagnosis
from burnside.forensics import evidence_of


def comparison_json(comparison: Comparison, diagnoses: list[Diagnosis]) -> str:
    """Everything the table shows, the tolerances used, and the diagnoses, as one JSON document."""
    first = comparison.first_divergence
    doc = {
        "a": comparison.a.to_dict(),
        "b": comparison.b.to_dict(),
        "passed": comparison.passed,
        "worst": comparison.worst,
        "tolerances": [{"glob": glob, **vars(tol)} for glob, tol in comparison.tolerances_used()],
        "kind": comparison.kind,
        "first_divergence": comparison.first_divergence_name,
        "first_divergence_shape": ({"name": shape.name, "a": shape.a, "b": shape.b}
                                   if (shape := comparison.first_shape_divergence) is not None else None),
        #: step (batch, in a forward trace) -> the first layer output or output that diverges there
        "first_divergence_by_step": {str(k): v for k, v in comparison.first_divergence_by_step().items()},
        "loading": [f.to_dict() for f in comparison.loading],
        "first_divergence_layer": comparison.layer_of(first)[0] if first else None,
        "first_divergence_layer_settings": (layer.to_dict() if (layer := evidence_of(comparison).layer) is not None
                                            else None),
        "first_divergence_layer_reads": (reads.to_dict() if (reads := evidence_of(comparison).reads) is not None
                                         else None),
        "first_divergence_lookup": (lookup.to_dict() if (lookup := evidence_of(comparison).lookup) is not None
                                    else None),
        "first_divergence_side": first.ref.verdict if first is not None and first.ref is not None else None,
        "reference": str(comparison.reference) if comparison.reference is not None else None,
        "reference_pinned": comparison.reference_pinned or None,
        "reference_unpinned": comparison.reference_unpinned or None,
        "optimizer_differences": comparison.optimizer_differences,
        "accumulation": comparison.accumulation or None,
        "crashed": comparison.crashed or None,
        "loaded_names": comparison.renamed,  # B's start tensors by the A tensor they hold
        "captured_layers": comparison.captured,
        "constants_only_in_a": comparison.constants_only_in_a,
        "constants_only_in_b": comparison.constants_only_in_b,
        "tied_copies": comparison.tied_copies,
        "framework_differences": [d.to_dict() for d in comparison.framework_differences],
        "zero_gradients": [z.to_dict() for z in comparison.zero_gradients],
        "start_mismatch": [r.name for r in comparison.start_mismatch],
        "only_in_a": comparison.only_in_a,
        "only_in_b": comparison.only_in_b,
        "unrecorded_in_a": comparison.unrecorded_in_a,
        "unrecorded_in_b": comparison.unrecorded_in_b,
        "renamed": [{"a": p.a, "b": p.b, "known": p.known}
                    for p in pair_renamed(comparison.only_in_a, comparison.only_in_b)[0]],
        "structure": [{"name": p.name, "what": p.what, "a": p.a, "b": p.b, "transposed": p.transposed}
                      for p in comparison.structure],
        "tensors": [_row(r) for r in comparison.rows],
        #: the tensors a trace holds as statistics only, each with its verdict (`identical`, `out of tolerance`,
        #: `not judged`); present only when there are some, so a comparison of full traces reads as before
        **({"statistics": [r.to_dict() for r in comparison.statistics]} if comparison.statistics else {}),
        "diagnosis": [d.to_dict() for d in diagnoses],
    }
    return json.dumps(_strict(doc), indent=1, allow_nan=False)


def _row(row: TensorRow) -> dict:
    s = row.stats
    return {
        "name": row.name,
        "dtype": row.dtype,
        "shape": list(row.shape),
        "n": s.n,
        "max_abs_diff": s.max_abs,
        "max_ulps": s.max_ulps,
        "worst_index": list(row.worst_index) if row.worst_index is not None else None,
        "differing": s.differing,
        "out_of_tol": s.out_of_tol,
        "nonfinite_a_only": s.nonfinite_a_only,
        "nonfinite_b_only": s.nonfinite_b_only,
        "nan_one_side": s.nan_one_side,
        "identical": s.identical,
        "atol": row.tol.atol,
        "rtol": row.tol.rtol,
        "ulps": row.tol.ulps,
        "passed": row.passed,
        "reference": row.ref.to_dict() if row.ref is not None else None,
        "metrics": row.metrics.to_dict() if row.metrics is not None else None,
    }


def _strict(value: object) -> object:
    """NaN and infinities as "NaN" / "Infinity" / "-Infinity", as docs/trace-format.md writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value

"""A decoder attention under a key/value cache re-run from the recorded projections (`forensics.decode_attention`):
grouped-query heads' order, the mask or the cache at a decode step, the score scale."""

from __future__ import annotations

from burnside.compare import Comparison


#: What to do for each change of `forensics.decode_attention.VARIANTS` B's attention made.
_DECODE_FIXES = {
    "kv_tiled": "repeat each key/value head in place for grouped-query attention, as PyTorch's `repeat_kv` does "
                "(query head h reads key/value head h / n_rep: kv0, kv0, kv1, kv1, ...): "
                "`x.unsqueeze_dim::<5>(2).expand([b, kv, n_rep, s, d]).reshape([b, kv * n_rep, s, d])`, not "
                "`x.repeat_dim(1, n_rep)`, which tiles them (kv0, kv1, kv0, kv1, ...)",
    "mask_unshifted": "offset the causal mask by the cache's length at a decode step: query t, at position past + t, "
                      "sees keys 0..=past + t (`Tensor::tril_mask([s, past + s], past as i64, &device)`), or build "
                      "no mask for a one-token step, which sees the whole cache; the prompt's mask (offset 0) hides "
                      "the cache from it",
    "no_mask": "mask the keys after each query (a causal mask: `Tensor::tril_mask([s, past + s], past as i64, "
               "&device)` then `mask_fill(mask, f32::NEG_INFINITY)` on the scores), as PyTorch's decoder does",
    "cache_not_appended": "store each step's keys and values back into the cache (`cache = cat([cache, new], "
                          "seq_dim)` after every step, the prompt's and each decode step's), as PyTorch's "
                          "`DynamicCache.update` does: B's cache stopped growing after the prompt",
    "cache_doubled": "append each step's keys and values to the cache once: B appends them twice (the cache is "
                     "updated both where the step's keys are made and again before the scores)",
    "unscaled": "scale the scores by 1/sqrt(head_dim) before the softmax, as PyTorch's attention does (`scaling`)",
    "scaled_by_dim": "scale the scores by 1/sqrt(head_dim), as PyTorch's attention does, not 1/head_dim",
}


def decoded_otherwise(comparison: Comparison, first, decode, after: str) -> tuple[str, str]:
    """A decoder attention re-run from the recorded projections (`forensics.decode_attention`): B's output is A's
    attention with one change (heads' order, the mask or the cache at a decode step, the score scale)."""
    from burnside.forensics.decode_attention import VARIANTS

    b_name = comparison.side_name("b")
    stage = "the prompt" if decode.step == 0 else f"decode step {decode.step}"
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: re-run in float64 from "
                f"each side's recorded q/k/v projections of every step up to this one ({stage}; {decode.heads} "
                f"query heads, {decode.kv_heads} key/value heads of {decode.head_dim}), {b_name}'s "
                f"{decode.module} is {VARIANTS[decode.changed]} (within {decode.residuals[decode.changed]:.2g}; "
                f"as PyTorch computes it, {decode.residuals['as_pytorch']:.2g}; A's own reproduced within "
                f"{decode.a_residual:.2g})")
    return evidence, _DECODE_FIXES[decode.changed]

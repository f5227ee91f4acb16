"""The masks or memory PyTorch's own attention layer ran with, and the one B's ran otherwise
(`forensics.transformer_layer`), said with the burn code that undoes it."""

from __future__ import annotations

from burnside.compare import Comparison


def _recorded(name: str) -> str:
    """`activations.encoder` as a person reads it: `encoder's output`, `encoder's input`, `the batch's src`."""
    stage, _, rest = name.partition(".")
    return {"activations": f"{rest}'s output", "layer_inputs": f"{rest}'s input",
            "inputs": f"the batch's `{rest}`"}.get(stage, name)


def masking(masking) -> str:
    """A masking with its ids said as a person reads them."""
    text = masking.shown()
    if masking.ids:
        stage, _, rest = masking.ids.partition(".")
        said = f"the batch's `{rest}`" if stage == "inputs" else f"the ids {rest} is fed"
        text = text.replace(f"of {masking.ids}", f"of {said}")
    return text


def masked_otherwise(comparison: Comparison, first, masks, after: str, kind: str | None) -> tuple[str, str]:
    """PyTorch's attention layer re-run on A's recorded tensors with one attention's mask or memory changed gives B's
    output (`forensics.transformer_layer`): that change, with the burn code that undoes it."""
    b_name, attn = comparison.side_name("b"), masks.changed
    ours, theirs = masks.own[attn], masks.b
    role = ("cross-attention" if attn.endswith("multihead_attn") else "self-attention")
    if masks.b_heads and masks.b_heads != masks.heads.get(attn):
        count = masks.heads.get(attn)
        evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s "
                    f"{masks.module} ({kind or masks.kind}) computes as PyTorch's does but its {role} {attn} splits "
                    f"the width into {masks.b_heads} heads where PyTorch's has {count} (`num_heads`). Re-run on A's "
                    f"recorded tensors with A's masks, {b_name}'s output is the layer so within "
                    f"{masks.b_residual:.2g}, A's within {masks.a_residual:.2g}")
        fix = (f"build {attn} with PyTorch's {count} heads: `MultiHeadAttentionConfig::new(d_model, {count})` (in a "
               f"`TransformerEncoderConfig`/`TransformerDecoderConfig`, its `n_heads` {count}); the projections' "
               "weights are the same for any head count, so a wrong one loads without an error")
        return evidence, fix
    if ours.memory != theirs.memory:
        what = (f"its {role} {attn} reads {_recorded(theirs.memory)} as its keys and values where PyTorch's reads "
                f"{_recorded(ours.memory)} (the memory)")
        fix = (f"give {attn} {_recorded(ours.memory)} as its memory, as the PyTorch forward does, not "
               f"{_recorded(theirs.memory)}: burn's `TransformerDecoderInput::new(target, memory)` with `memory` "
               "the encoder's output (by hand, `MhaInput::new(x, memory.clone(), memory)`)")
    else:
        what = f"its {role} {attn} runs with {masking(theirs)} where PyTorch's has {masking(ours)}"
        fix = _mask_code(masks.kind, attn, ours, theirs)
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {masks.module} "
                f"({kind or masks.kind}) computes as PyTorch's does but {what}. Re-run on A's recorded tensors (each "
                f"attention's masks found from its own recorded output), {b_name}'s output is the layer so within "
                f"{masks.b_residual:.2g}, A's with its own masks within {masks.a_residual:.2g}")
    return evidence, fix


def _mask_code(kind: str, attn: str, ours, theirs) -> str:
    """The burn code that gives ``attn`` A's masks (``ours``) where the port has ``theirs``."""
    causal_a, causal_b = ours.mask.endswith("causal"), theirs.mask.endswith("causal")
    pad_a = ours.mask.split("+")[0] if ours.mask.split("+")[0] in ("padding", "inverted") else ""
    pad_b = theirs.mask.split("+")[0] if theirs.mask.split("+")[0] in ("padding", "inverted") else ""
    ids = ours.ids or theirs.ids
    stage, _, name = ids.partition(".")
    ids_code = f"{name.split('#')[0].replace('.', '_')}_ids" if stage != "inputs" else name
    setter = ("mask_pad" if kind != "TransformerDecoderLayer" else
              "memory_mask_pad" if attn.endswith("multihead_attn") else "target_mask_pad")
    holder = {"TransformerEncoderLayer": "TransformerEncoderInput::new(x)",
              "TransformerDecoderLayer": "TransformerDecoderInput::new(target, memory)",
              "MultiheadAttention": "MhaInput::new(query, key, value)"}[kind]
    pad_code = f"`{holder}.{setter}({ids_code}.clone().equal_elem({0}))`"
    parts = []
    if causal_a and not causal_b:
        attn_setter = "target_mask_attn" if kind == "TransformerDecoderLayer" else "mask_attn"
        parts.append(f"mask {attn} causally as the PyTorch forward does (its `tgt_mask`, "
                     "`generate_square_subsequent_mask`): "
                     f"`{holder}.{attn_setter}(generate_autoregressive_mask(batch, seq, &device))` "
                     "(`burn::nn::attention::generate_autoregressive_mask`)")
    elif causal_b and not causal_a:
        parts.append(f"leave the causal mask out of {attn}, as the PyTorch forward does (no `mask_attn`)")
    if pad_a == "padding" and not pad_b:
        parts.append(f"mask {attn}'s padded keys as the PyTorch forward does (its key padding mask): {pad_code}, "
                     "burn's padding mask true at the padding")
    elif pad_a == "padding" and pad_b == "inverted":
        parts.append(f"invert {attn}'s padding mask: burn's `{setter}` is true where a key is padding (as PyTorch's "
                     f"key_padding_mask), {pad_code}, not true at the tokens (`not_equal_elem`, or a mask of 1 at "
                     "tokens as Hugging Face's attention_mask)")
    elif pad_b and not pad_a:
        parts.append(f"leave the padding mask out of {attn}, as the PyTorch forward does (no `{setter}`)")
    return "; ".join(parts) or f"give {attn} the masks the PyTorch forward gives it ({masking(ours)})"

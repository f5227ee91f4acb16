"""What B's layer read, re-run on A's recorded tensors (`forensics.reads`, `forensics.attention`): an activation or
residual left out, added or of another form, an attention's scale, mask, q/k/v order, softmax axis or heads."""

from __future__ import annotations

from burnside.compare import Comparison


def read_otherwise(comparison: Comparison, first, reads, after: str, kind: str | None) -> tuple[str, str]:
    """The layer computes as PyTorch's does, on another input: the one `forensics.reads` found B's output to be
    the layer of, and what A's recorded input is, in the same terms."""
    module, b_name = reads.module, comparison.side_name("b")
    theirs = f"`{reads.b.shown()}`"
    ours = f"`{reads.a.shown()}`" if reads.a is not None else f"its recorded input ({reads.input})"
    if reads.direct:
        # the module's own output is the attention of its recorded children, compared as it is
        apart = "; ".join(f"{t} where A's has {o}" for o, t in reads.a.attention.apart(reads.b.attention,
                                                                                    reads.a.d_model)) \
            if reads.a is not None and reads.a.attention is not None and reads.b.attention is not None else ""
        evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {module} "
                    f"({kind or 'attention'}) attends to the same {', '.join(o.shown for o in reads.b.operands)} "
                    f"otherwise{f', with {apart}' if apart else ''}. Re-run on A's recorded tensors, {b_name}'s "
                    f"output is {theirs} (within {reads.b_residual:.2g}), where A's is {ours} (within "
                    f"{reads.a_residual:.2g})")
        return evidence, _read_fix(reads, b_name)
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {module} "
                f"({kind or 'layer'}) computes as PyTorch's does on another input. Re-run on A's recorded tensors, "
                f"{b_name}'s output is {module} of {theirs} (within {reads.b_residual:.2g}), where A's {module} reads "
                f"{ours}")
    return evidence, _read_fix(reads, b_name)


def _read_fix(reads, b_name: str) -> str:
    """What to change before the layer, from what each side read (`forensics.reads.FUNCTIONS` name the
    activations)."""
    from burnside.forensics.reads import FUNCTIONS

    module, theirs, ours = reads.module, reads.b, reads.a
    said = lambda f: FUNCTIONS[f][0]
    if theirs.attention is not None and ours is not None and ours.attention is not None:
        return _attention_fix(module, ours.attention, theirs.attention, ours.d_model, b_name,
                              [o.shown for o in ours.operands])
    if ours is not None and theirs.operands == ours.operands and (theirs.function or "").startswith("reparam:") \
            and (ours.function or "").startswith("reparam:"):
        mean, noise, log_var = (o.shown for o in ours.operands)
        var = lambda shown: shown.removeprefix("input ").rsplit(".", 1)[-1].split("'")[0]  # noqa: E731
        scale = ours.function.removeprefix("reparam:")
        return (f"compute what {module} reads as the PyTorch forward does, `{ours.shown()}`: the exponent of "
                f"{log_var} scaled by {scale} (a log-variance's standard deviation is exp(0.5 * logvar)), not "
                f"`{theirs.shown()}`; in burn, `{var(mean)} + {var(noise)} * {var(log_var)}"
                f".mul_scalar({scale if '.' in scale else scale + '.0'}).exp()`")
    tokens = {"first": "`x.slice([0..batch, 0..1]).squeeze_dim::<2>(1)`",
              "last": "`x.slice([0..batch, seq - 1..seq]).squeeze_dim::<2>(1)`",
              "mean": "`x.mean_dim(1).squeeze_dim::<2>(1)`", "max": "`x.max_dim(1).squeeze_dim::<2>(1)`"}
    if ours is not None and theirs.function is None and ours.function is None and len(theirs.operands) == 1 \
            and len(ours.operands) == 1 and all("|" in o.name for o in (*theirs.operands, *ours.operands)) \
            and theirs.operands[0].name.split("|")[0] == ours.operands[0].name.split("|")[0]:
        how = ours.operands[0].name.split("|")[1]
        return (f"feed {module} {ours.operands[0].shown} as the PyTorch forward does ({tokens[how]} of the "
                f"[batch, tokens, width] output), not {theirs.operands[0].shown}: a class token read where PyTorch "
                "reads it (torchvision's ViT and BERT's pooler read the first token), not pooled otherwise")
    if (theirs.function or "").startswith("halves:"):
        operand = theirs.operands[0].shown
        what = "channels" if theirs.function == "halves:1" else "features"
        return (f"concatenate what {module} reads in the PyTorch forward's order: {b_name} feeds it {operand} with the "
                f"two halves of its {what} swapped, `cat([b, a])` where PyTorch's forward has `cat([a, b])` (a "
                "sinusoidal embedding's sin and cos, a skip connection and the upsampled tensor): put the parts in "
                "`Tensor::cat(vec![...], dim)` in PyTorch's order")
    if ours is not None and len(theirs.operands) == 1 and len(ours.operands) == 1 and theirs.operands == ours.operands:
        operand = theirs.operands[0].shown
        if theirs.function is None:
            return (f"apply {said(ours.function)} to {operand} before {module}, as the PyTorch forward does: "
                    f"{b_name} feeds it {operand} as it is (the activation is missing; `burn::tensor::activation`)")
        if ours.function is None:
            return (f"feed {module} {operand} as it is, as the PyTorch forward does: {b_name} applies "
                    f"{said(theirs.function)} to it that PyTorch's forward does not")
        return (f"use {said(ours.function)} between {operand} and {module}, as the PyTorch forward does, not "
                f"{said(theirs.function)}")
    if ours is not None and ours.function is None and theirs.function is None:
        missing = [o.shown for o in ours.operands if o not in theirs.operands]
        extra = [o.shown for o in theirs.operands if o not in ours.operands]
        if missing and not extra:
            return (f"add {' and '.join(missing)} to what {module} reads (a residual connection left out): the "
                    f"PyTorch forward feeds it `{ours.shown()}`, {b_name} `{theirs.shown()}`")
        if extra and not missing:
            return (f"feed {module} `{ours.shown()}` as the PyTorch forward does: {b_name} adds {' and '.join(extra)} "
                    "(a residual the PyTorch forward does not have, or one added twice)")
    return (f"feed {module} what the PyTorch forward feeds it (`{ours.shown()}`" if ours is not None else
            f"feed {module} what the PyTorch forward feeds it ({reads.input}") + \
        f"), not `{theirs.shown()}`: compare the code between them with the PyTorch model's forward"


def _attention_fix(module: str, ours, theirs, d_model: int, b_name: str, sources: list[str]) -> str:
    """What to change in the attention before ``module``: the one setting of A's attention B's differs in."""
    head_dim = d_model // ours.heads
    if ours.scale != theirs.scale:
        wanted = {"1/sqrt(head_dim)": f"1/sqrt(head_dim) = 1/sqrt({head_dim})", "1/sqrt(d_model)":
                  f"1/sqrt(d_model) = 1/sqrt({d_model})", "1/head_dim": f"1/head_dim = 1/{head_dim}",
                  "none": "none (the scores as they are)"}
        return (f"scale the attention scores by {wanted[ours.scale]} as the PyTorch forward does, not "
                f"{wanted[theirs.scale].split(' = ')[0]}: the scale is per head")
    if ours.mask != theirs.mask:
        return _mask_fix(ours, theirs, b_name)
    if ours.order != theirs.order:
        named = ", ".join(f"{role} from the {('first', 'second', 'third')[theirs.order.index(role)]} part"
                          for role in "qkv")
        where = f"the packed {sources[0]}" if len(sources) == 1 else ", ".join(sources)
        return (f"take q, k and v from {where} in PyTorch's order ({' '.join(ours.order)}): {b_name} takes {named}")
    if ours.softmax != theirs.softmax:
        return ("take the softmax of the scores over the keys (the last axis, `softmax(scores, 3)` of "
                "[batch, heads, queries, keys]), as the PyTorch forward does, not over the queries")
    return (f"split the attention into {ours.heads} heads of {head_dim}, as the PyTorch forward does, not "
            f"{theirs.heads} heads of {d_model // theirs.heads}")


def _mask_fix(ours, theirs, b_name: str) -> str:
    """What to change in the masks of the attention's scores: the padding mask (kept, left out or inverted) and the
    causal one, each where B's differs from A's (`forensics.attention.MASKS`)."""
    def parts(mask: str) -> tuple[str, bool]:
        return mask.split("+")[0] if mask.startswith(("padding", "inverted")) else "", mask.endswith("causal")

    (pad_a, causal_a), (pad_b, causal_b) = parts(ours.mask), parts(theirs.mask)
    name = ours.padding or "attention_mask"
    masked = {"padding": 0, "inverted": 1}
    said = []
    if pad_a and not pad_b:
        value = masked[pad_a]
        convention = ("is 1 at a token, 0 at padding; Hugging Face adds a large negative to the scores of keys "
                      "where it "
                      "is 0" if value == 0 else "is 1 (true) at padding")
        said.append(f"mask the padding keys before the softmax, as the PyTorch forward does: {b_name} leaves the "
                    f"padding mask out, so each token attends to the padding too ({name} {convention}). In burn: "
                    f"`let padding = {name}.equal_elem({value});` ([batch, seq] Bool, true at padding"
                    f"{'' if value == 0 else '; the mask itself where the port holds it as Bool'}) and "
                    "`let scores = scores.mask_fill(padding.reshape([batch, 1, 1, seq]).expand([batch, heads, seq, "
                    "seq]), f32::MIN);` before `softmax(scores, 3)`, or burn's MultiHeadAttention with "
                    "`MhaInput::self_attn(x).mask_pad(padding)`")
    elif pad_a and pad_b and pad_a != pad_b:
        value, other = masked[pad_a], masked[pad_b]
        said.append(f"mask the keys where {name} is {value} (the padding), as the PyTorch forward does: {b_name} "
                    f"masks where it is {other} (the tokens) and attends to the padding; in burn the mask to fill "
                    f"is `{name}.equal_elem({value})`, not `{name}.equal_elem({other})`")
    elif pad_b and not pad_a:
        said.append(f"attend to every key, as the PyTorch forward does: {b_name} masks the scores by {name} where "
                    "PyTorch's does not")
    if causal_a and not causal_b:
        said.append("mask the attention scores causally before the softmax, as the PyTorch forward does (each token "
                    "attends to itself and the tokens before it: `mask_fill` of the upper triangle with -inf, or "
                    "`burn::nn::attention::generate_autoregressive_mask`)")
    elif causal_b and not causal_a:
        said.append("attend to every token, as the PyTorch forward does: B masks the scores causally where PyTorch "
                    "does not")
    return "; and ".join(said)

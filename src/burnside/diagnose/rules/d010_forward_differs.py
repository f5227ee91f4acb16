"""D010 forward or loss differs from identical inputs and parameters.

## What it does
Finds the first divergence at a step's logits or loss, or at a layer's recorded output
whose input (the layer recorded before it) agrees, where both sides started that step
from the same inputs and parameters (within tolerance) and got gradients for the same
parameters: the forward differs there. Logits that differ while every recorded layer
output agrees mean the code after the last recorded layer does; a loss
that differs while the logits agree means the loss function does, and a loss ratio equal
to the batch size names a sum where the other side takes the mean. A layer whose recorded
input (`layer_inputs`) is not the previous layer's output (a sum of embeddings, a residual)
and whose output on B is not its formula of A's input with any setting is named as fed
another input: the code before it. When the layer is a Linear, LayerNorm, RMSNorm, Conv1d or Conv2d and its
output on B is the layer (B's parameters, A's settings) of one of A's tensors recorded before it, as it is, under an
activation (ReLU, GELU in either form, SiLU, tanh, sigmoid, leaky ReLU, ELU), summed with another, or a VAE's
reparameterisation of a mean, a batch noise input and a log-variance (`mu + eps * exp(0.5 * logvar)`, the exponent's
scale 0.5 or 1), that is named beside what A's input is in the same terms: an activation left out, added or of
another form, a residual left out or added, a log-variance's scale (`forensics.reads`). PyTorch's own attention
layers (`nn.MultiheadAttention`, `nn.TransformerEncoderLayer`, `nn.TransformerDecoderLayer`, batch-first) are
re-run in numpy from A's recorded tensors, each attention's masks found from its own recorded output (causal, the
padding mask of the batch's ids or the ids an embedding was fed, inverted, each with or without the causal mask; a
cross-attention's memory among the tensors recorded before it): the one mask left out, inverted or added, or the
other memory, that gives B's output is named with burn's `TransformerEncoderInput`/`TransformerDecoderInput`/
`MhaInput` call that undoes it (`forensics.transformer_layer`). An attention is re-run from its recorded query,
key and value (a packed
projection, or three named ones) at its output projection, or at a Hugging Face self-attention module
(`BertSelfAttention`) whose own output is the heads' context: another scale, number of heads, q/k/v order or
softmax axis, the padding mask (the batch's `attention_mask`, 1 at a token) left out or inverted, a causal mask
left out or added (`forensics.attention`). An embedding's ids are read back from its output rows, each a row of its
weight bit for bit, beside what A fed it: position ids offset (counted from 1), another input's ids in their place
(the token types as positions), ids clipped at a bound (`forensics.lookups`). Without a float64 reference, a
divergence no more than
32x the largest difference of the layer outputs before it at that step is within rounding's
reach and named by no rule (the verdict says to judge it with a reference); the first
forward tensor of the step beyond that reach is diagnosed instead, if any. A port that did
not load the checkpoint as PyTorch holds it (D014) gets no D010: its start is not identical.

## Why is this bad?
A GELU where the PyTorch model has a ReLU, a missing layer or a different op, or
`reduction="sum"` against PyTorch's mean all train differently from the first step;
everything downstream (gradients, updates) then differs too and would be blamed instead.

## Example
```rust
let h = gelu(self.fc1.forward(x)); // PyTorch: torch.relu
let x = self.attn.forward(self.ln1.forward(x.clone())); // PyTorch: x = x + self.attn(self.ln1(x))
let loss = ce.forward(logits, y).mul_scalar(batch as f64); // PyTorch: mean
let context = softmax(scores, 3).matmul(v); // PyTorch (HF BERT): the padding keys masked first
let positions = Tensor::<1, Int>::arange(1..seq as i64 + 1, &device); // PyTorch (BERT): 0..seq
```

## Use instead
```rust
let h = relu(self.fc1.forward(x));
let x = x.clone() + self.attn.forward(self.ln1.forward(x));
let loss = ce.forward(logits, y); // burn's CrossEntropyLoss averages, like PyTorch's default
let padding = attention_mask.equal_elem(0); // [batch, seq], true at padding
let scores = scores.mask_fill(padding.reshape([batch, 1, 1, seq]).expand([batch, heads, seq, seq]), f32::MIN);
let context = softmax(scores, 3).matmul(v);
let positions = Tensor::<1, Int>::arange(0..seq as i64, &device);
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.forensics import evidence_of
from burnside.diagnose.diagnosis import Diagnosis
from burnside.diagnose.rules.d013_dropout_mask import is_dropout_divergence
from burnside.rule import Severity
from burnside.trace import parse_name

ID = "D010"
NAME = "forward-differs"
TITLE = "forward or loss differs from identical inputs and parameters"
SEVERITY = Severity.ERROR


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis when the first divergence is a step's logits or loss, or a layer's output whose
    input agrees, from an identical start."""
    first = comparison.first_divergence
    parsed = parse_name(first.name) if first is not None else None
    if parsed is None or parsed.stage not in ("layer_inputs", "activations", "logits", "outputs", "loss_inputs",
                                              "loss") or \
            comparison.start_mismatch or comparison.loading:
        return []  # not from an identical start (D006, D014 name what differs there)
    k = parsed.step
    if comparison.a.grads_len.get(k) != comparison.b.grads_len.get(k):
        return []  # parameters missing from one forward: D008
    if comparison.drift_before(k) > 0 and first.ref is None:
        # the step starts from parameters already apart (rounding since step 0, whose forward agreed): without a
        # float64 reference a grown rounding difference cannot be told from a forward that computes otherwise
        return []
    if comparison.within_rounding_reach(first):
        # no float64 reference, and the difference is within what the rounding already seen before it grows to (a
        # correct port's LayerNorm after a residual measured 1.19e-6 here; the verdict says to judge it with one):
        # the first forward tensor of the step beyond that reach is where the forward computes otherwise, if any
        first = _beyond_rounding(comparison, first)
        if first is None:
            return []
        parsed = parse_name(first.name)
    side = first.ref.verdict if first.ref is not None and first.ref.verdict in ("a", "b") else "b"
    if parsed.stage == "activations":
        return _layer(comparison, first, side)
    if parsed.stage == "layer_inputs":
        return _layer_input(comparison, first, side)
    if parsed.stage in ("logits", "outputs"):  # a forward trace's model outputs are its logits
        what = ("the logits" if parsed.stage == "logits" else "the model's output" if parsed.rest == "output"
                else f"the model's output `{parsed.rest}`")
        taps = [r for r in comparison.rows
                if (p := parse_name(r.name)) is not None and p.stage == "activations" and p.step == k]
        if taps and all(r.passed or comparison.within_rounding_reach(r) for r in taps):
            order = comparison.a.metadata.get("activations")
            recorded = [parse_name(r.name).rest for r in taps]
            if isinstance(order, list):  # A's execution order, where the trace's order may be another
                recorded = [m for m in order if m in recorded] or recorded
            last = recorded[-1]
            return [Diagnosis(
                ID, TITLE,
                f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while every layer output recorded at "
                f"step {k} agrees ({len(taps)} of them, the last {last}) and the step's inputs and parameters agree: "
                f"{comparison.side_name(side)}'s forward computes something else after {last}",
                f"compare the code after {last} and before {what} with the PyTorch model's forward: what makes "
                f"{what} from {last}'s output (a reduction over another dimension, `max` where `max(1)` is "
                "meant, a reshape, slice or transpose, a softmax, a scale, a residual added or left out, a head "
                "applied to the wrong tensor); the layers up to it compute the same",
            )]
        return [Diagnosis(
            ID, TITLE,
            f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) although step {k}'s inputs and parameters "
            f"agree: {comparison.side_name(side)}'s forward computes something else",
            "compare the forward layer by layer with the PyTorch model: activations (relu/gelu/tanh variants), "
            "layer order, a missing or extra op, a transposed weight",
        )]
    if parsed.stage == "loss_inputs":
        call = _loss_call(comparison) or {}
        fn = f"the loss function ({call['fn']})" if isinstance(call.get("fn"), str) else "the loss function"
        what = {"input": "its input", "target": "its target"}.get(parsed.rest, f"its `{parsed.rest}`")
        return [Diagnosis(
            ID, TITLE,
            f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while step {k}'s logits agree: what "
            f"{fn} inside the loss was given differs, {what}",
            f"compute {what} as the PyTorch loss does before it calls {fn}: a TD target's discount, reward or done "
            "mask, the network it is taken from (a frozen target network, not the online one), a gather by the "
            "actions taken, a mask or a slice",
        )]
    mine = (comparison.a if side == "a" else comparison.b).losses.get(k)
    theirs = (comparison.b if side == "a" else comparison.a).losses.get(k)
    logits = next((r for r in comparison.rows if r.name == f"step{k}.logits"), None)
    batch = logits.shape[0] if logits is not None and logits.shape else None
    evidence = f"{first.name} differs while step {k}'s logits agree: the loss function differs"
    fix = "compute the loss as the PyTorch loop does (loss function, its reduction, label smoothing, weights)"
    call = _loss_call(comparison)
    reads_batch = any(t.metadata.get("loss_input") == "batch" for t in (comparison.a, comparison.b))
    fit = evidence_of(comparison).loss
    if call is not None and reads_batch:
        fn = call.get("fn", "its loss function")
        settings = ", ".join(f"{key} {value}" for key, value in call.items() if key != "fn")
        evidence = f"{first.name} differs while step {k}'s logits agree: the loss, of the output and the whole batch"
        if fit is not None and fit.a is not None and fit.b is None and fit.a.read == "loss_inputs":
            evidence += (f", is {fit.a.name} of what {fn} was given on {comparison.side_name('a')}; "
                         f"{comparison.side_name('b')}'s is no loss of that input and target: what its loss "
                         "function is given differs")
        fix = (f"compute what the loss function is given as the PyTorch loss does before it calls {fn}"
               f"{f' ({settings})' if settings else ''}: the target (a TD target's discount, reward and done "
               "mask, the network it is taken from: a frozen target network, not the online one), a gather by "
               "the actions taken, a mask or a slice; and the loss function with PyTorch's settings")
    if mine is not None and theirs:
        ratio = mine / theirs
        evidence += f"; {comparison.side_name(side)}'s loss is {ratio:.6g}x the other's"
        if batch and abs(ratio - batch) < 1e-3 * batch:
            evidence += f", the batch size {batch}: a sum where the other side averages"
            fix = "average the loss over the batch (PyTorch's default reduction is 'mean'), do not sum it"
        elif batch and abs(ratio * batch - 1) < 1e-3:
            evidence += f", 1/{batch}: a mean where the other side sums"
            fix = "sum the loss over the batch as the other side does (reduction='sum')"
    return [Diagnosis(ID, TITLE, evidence, fix)]


def _beyond_rounding(comparison: Comparison, first):
    """The first forward tensor of ``first``'s step (layer outputs in A's execution order, then the model's output)
    out of tolerance by more than rounding's reach (`Comparison.within_rounding_reach`), None when there is none."""
    k = parse_name(first.name).step
    order = comparison.a.metadata.get("activations")
    order = order if isinstance(order, list) else []

    def rank(row) -> int:
        rest = parse_name(row.name).rest
        return order.index(rest) if parse_name(row.name).stage == "activations" and rest in order else len(order)

    failing = [r for r in comparison.rows if not r.passed and (p := parse_name(r.name)) is not None and p.step == k
               and p.stage in ("activations", "logits", "outputs")]
    return next((r for r in sorted(failing, key=rank) if not comparison.within_rounding_reach(r)), None)


def _loss_call(comparison: Comparison) -> dict | None:
    """The loss function found inside the loss (metadata `loss_call`, PyTorch's side), if a side recorded it."""
    return next((t.metadata["loss_call"] for t in (comparison.a, comparison.b)
                 if isinstance(t.metadata.get("loss_call"), dict)), None)


def _layer(comparison: Comparison, first, side: str) -> list[Diagnosis]:
    """The first diverging tensor is a layer's output and what feeds it agrees: the forward differs
    between the layer before it (or the inputs) and this layer."""
    kind, before = comparison.layer_of(first)
    if before is not None and not before.passed and not comparison.within_rounding_reach(before):
        return []
    if is_dropout_divergence(comparison):
        return []  # a random mask (D013), not code that computes otherwise
    # the layer's own measure is of the comparison's first divergence, not of a later layer beyond rounding's reach
    own = first is comparison.first_divergence
    layer = evidence_of(comparison).layer if own else None
    if layer is not None and layer.differing():
        return []  # D011 measured the layer's own settings: the more precise cause
    module = parse_name(first.name).rest
    where = f"{module}{f' ({kind})' if kind else ''}"
    missing = _operation_missing(comparison, first, kind, module)
    if missing is not None:
        return [missing]
    after = f"the layer before it, {parse_name(before.name).rest}, agrees" if before is not None else \
        "it is the first layer recorded, and the step's inputs and parameters agree"
    between = (f"between {parse_name(before.name).rest} and {module}" if before is not None
               else f"from the inputs up to {module}")
    reads = evidence_of(comparison).reads if own and side == "b" else None
    if reads is not None and reads.b is not None:
        return [_read_otherwise(comparison, first, reads, after, kind)]
    masks = evidence_of(comparison).masks if own and side == "b" else None
    if masks is not None and masks.b is not None:
        return [masked_otherwise(comparison, first, masks, after, kind)]
    positions = evidence_of(comparison).positions if own and side == "b" else None
    if positions is not None and positions.b != positions.a:
        return [_positioned_otherwise(comparison, first, positions, after, kind)]
    rope = evidence_of(comparison).rope if own and side == "b" else None
    if rope is not None:
        return [_rope_otherwise(comparison, first, rope, after, kind)]
    decode = evidence_of(comparison).decode if own and side == "b" else None
    if decode is not None:
        return [_decoded_otherwise(comparison, first, decode, after)]
    lookup = evidence_of(comparison).lookup if own and side == "b" else None
    if lookup is not None:
        return [_looked_up_otherwise(comparison, first, lookup, after, kind)]
    if layer is not None and layer.input_is_before is False and before is not None:
        # the layer reads what A recorded feeding it, computed after the tap before it (a sum, a residual)
        previous = parse_name(before.name).rest
        reads = (f"{module} does not read {previous}'s output: A recorded its input ({layer.input}) as something "
                 f"computed after it (a sum of embeddings, a residual)")
        if not layer.measured.get("b") and layer.input_from_a:
            return [Diagnosis(
                ID, TITLE,
                f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}; {reads}, and "
                f"{comparison.side_name('b')}'s output is not its {kind} of that input with any setting, as A's is "
                f"within {min(layer.residuals['a'].values(), default=0.0):.2g}: "
                f"the layer's input already differs on {comparison.side_name('b')}",
                f"compare the code that computes {module}'s input (after {previous}, before {module}) with the PyTorch "
                f"model's forward: the sum or concatenation that makes it (e.g. token plus position embeddings, a "
                "residual), its operands and their order; the layer itself computes as PyTorch's does on the input "
                "it gets",
            )]
        between = f"after {previous} and up to {module}, including the code that computes {module}'s input"
        after += f"; {reads}"
    fed = evidence_of(comparison).dropout_input if own else None
    if layer is None and fed is not None and fed.input_is_before is False and before is not None:
        # a dropout, off at inference, fed what a function computes from the tap before it (a functional ReLU)
        after += (f"; {module} does not read {parse_name(before.name).rest}'s output: A recorded its input "
                  f"({fed.input}) as something computed after it (a function such as the activation, a residual)")
    return [Diagnosis(
        ID, TITLE,
        f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {comparison.side_name(side)}'s "
        f"forward computes something else {between} ({where})",
        f"compare the code {between} with the PyTorch model's forward: the layer's own settings, the op between "
        "them (a sum where PyTorch takes the mean, a reduction or softmax over another dimension, a reshape or "
        "transpose, a slice or index that reads another token or position, a scale such as attention's "
        "1/sqrt(head_dim)), an activation of another form" + _KNOWN_DEFAULTS.get(kind or "", ""),
    )]


def _read_otherwise(comparison: Comparison, first, reads, after: str, kind: str | None) -> Diagnosis:
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
        return Diagnosis(ID, TITLE, evidence, _read_fix(reads, b_name))
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {module} "
                f"({kind or 'layer'}) computes as PyTorch's does on another input. Re-run on A's recorded tensors, "
                f"{b_name}'s output is {module} of {theirs} (within {reads.b_residual:.2g}), where A's {module} reads "
                f"{ours}")
    return Diagnosis(ID, TITLE, evidence, _read_fix(reads, b_name))


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


def _positioned_otherwise(comparison: Comparison, first, positions, after: str, kind: str | None) -> Diagnosis:
    """A rotary embedding whose table is of other positions (`forensics.positions`): B's read back from its rows."""
    b_name = comparison.side_name("b")
    theirs = ", ".join(map(str, positions.b))
    ours = ", ".join(map(str, positions.a))
    restarted = positions.b and positions.b[0] == 0 and positions.a and positions.a[0] > 0
    offset = (positions.b[0] - positions.a[0]) if positions.b and positions.a else None
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s "
                f"{positions.module} ({kind or 'rotary embedding'}) computes the table of positions [{theirs}] where "
                f"PyTorch's is of positions [{ours}] (the batch's position_ids); each row of {b_name}'s output is A's "
                "row of that position")
    if restarted:
        fix = (f"count the positions of a step after the cache from the cache's length, as the PyTorch loop does: at "
               f"step {positions.step}, positions {ours}, the batch's `position_ids` (`batch.int_input::<2>"
               "(\"position_ids\")`), not from 0; a decode step's rotary angles are those of its place in the whole "
               "sequence")
    elif offset:
        fix = (f"give {positions.module} the positions the PyTorch loop does (the batch's `position_ids`, "
               f"[{ours}]): {b_name}'s are {offset:+d} off")
    else:
        fix = f"give {positions.module} the positions the PyTorch loop does (the batch's `position_ids`, [{ours}])"
    return Diagnosis(ID, TITLE, evidence, fix)


def _rope_otherwise(comparison: Comparison, first, rope, after: str, kind: str | None) -> Diagnosis:
    """A rotary table of another layout or theta (`forensics.positions.measure_rope_form`), fitted on each side."""
    b_name = comparison.side_name("b")
    said = lambda form: f"{form[0]} with theta {form[1]:g}" + (  # noqa: E731
        f" and its frequencies scaled ({form[2]})" if form[2] else "")
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {rope.module} "
                f"({kind or 'rotary embedding'}) computes RoPE's table as {said(rope.b)} where PyTorch's is "
                f"{said(rope.a)} (each fitted on the step's positions: the cos of position x frequency, the "
                "frequencies theta^(-2i/d) laid out in two halves for rotate_half, in pairs for interleaved)")
    fixes = []
    if rope.a[0] != rope.b[0]:
        fixes.append("rotate as PyTorch's model does, rotate_half (x[i] with x[i + d/2], the frequencies in two "
                     "halves), not interleaved pairs (x[2i] with x[2i+1]) as burn's `RotaryEncoding` does: write "
                     "rotate_half by hand (`cat([-x2, x1])` of the two halves) or permute q's and k's features to "
                     "interleaved order before `RotaryEncoding` and back after"
                     if rope.a[0] == "rotate_half" else
                     "rotate interleaved pairs (x[2i] with x[2i+1]) as PyTorch's model does (burn's `RotaryEncoding`), "
                     "not rotate_half")
    if rope.a[1] != rope.b[1]:
        fixes.append(f"use RoPE's theta {rope.a[1]:g} as PyTorch's config does (`rope_theta`), not {rope.b[1]:g}: "
                     f"`RotaryEncodingConfig::new(max_len, head_dim).with_theta({rope.a[1]:g}.0)`, or the inverse "
                     f"frequencies 1 / {rope.a[1]:g}^(2i/d) by hand")
    if rope.a[2] and not rope.b[2]:
        fixes.append(f"scale RoPE's inverse frequencies as PyTorch's config does (`rope_scaling`, {rope.a[2]}: its "
                     f"lowest frequencies divided by {rope.factor:.4g}, the highest left as theta^(-2i/d), those "
                     "between blended), not theta^(-2i/d) alone: compute them as transformers' rope initialisation "
                     f"for {rope.a[2]} does (for llama3: factor, low_freq_factor, high_freq_factor and "
                     "original_max_position_embeddings of the config), or read them from the checkpoint's config "
                     "and build the table from those frequencies")
    elif rope.b[2] and not rope.a[2]:
        fixes.append("leave RoPE's inverse frequencies unscaled, theta^(-2i/d), as PyTorch's config does (no "
                     "`rope_scaling`)")
    return Diagnosis(ID, TITLE, evidence, "; ".join(fixes))


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


def _decoded_otherwise(comparison: Comparison, first, decode, after: str) -> Diagnosis:
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
    return Diagnosis(ID, TITLE, evidence, _DECODE_FIXES[decode.changed])


def _recorded(name: str) -> str:
    """`activations.encoder` as a person reads it: `encoder's output`, `encoder's input`, `the batch's src`."""
    stage, _, rest = name.partition(".")
    return {"activations": f"{rest}'s output", "layer_inputs": f"{rest}'s input",
            "inputs": f"the batch's `{rest}`"}.get(stage, name)


def _masking(masking) -> str:
    """A masking with its ids said as a person reads them."""
    text = masking.shown()
    if masking.ids:
        stage, _, rest = masking.ids.partition(".")
        said = f"the batch's `{rest}`" if stage == "inputs" else f"the ids {rest} is fed"
        text = text.replace(f"of {masking.ids}", f"of {said}")
    return text


def masked_otherwise(comparison: Comparison, first, masks, after: str, kind: str | None) -> Diagnosis:
    """PyTorch's attention layer re-run on A's recorded tensors with one attention's mask or memory changed gives B's
    output (`forensics.transformer_layer`): that change, with the burn code that undoes it."""
    b_name, attn = comparison.side_name("b"), masks.changed
    ours, theirs = masks.own[attn], masks.b
    role = ("cross-attention" if attn.endswith("multihead_attn") else "self-attention")
    if ours.memory != theirs.memory:
        what = (f"its {role} {attn} reads {_recorded(theirs.memory)} as its keys and values where PyTorch's reads "
                f"{_recorded(ours.memory)} (the memory)")
        fix = (f"give {attn} {_recorded(ours.memory)} as its memory, as the PyTorch forward does, not "
               f"{_recorded(theirs.memory)}: burn's `TransformerDecoderInput::new(target, memory)` with `memory` "
               "the encoder's output (by hand, `MhaInput::new(x, memory.clone(), memory)`)")
    else:
        what = f"its {role} {attn} runs with {_masking(theirs)} where PyTorch's has {_masking(ours)}"
        fix = _mask_code(masks.kind, attn, ours, theirs)
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {masks.module} "
                f"({kind or masks.kind}) computes as PyTorch's does but {what}. Re-run on A's recorded tensors (each "
                f"attention's masks found from its own recorded output), {b_name}'s output is the layer so within "
                f"{masks.b_residual:.2g}, A's with its own masks within {masks.a_residual:.2g}")
    return Diagnosis(ID, TITLE, evidence, fix)


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
    return "; ".join(parts) or f"give {attn} the masks the PyTorch forward gives it ({_masking(ours)})"


def _ids_of(name: str) -> str:
    """A recorded id tensor as a person reads it: `the batch's token_type_ids`, `the ids x.wte is fed`."""
    parsed = parse_name(name)
    if parsed is not None and parsed.stage == "inputs":
        return f"the batch's `{parsed.rest}`"
    return f"the ids {parsed.rest if parsed is not None else name} is fed"


def _looked_up_otherwise(comparison: Comparison, first, lookup, after: str, kind: str | None) -> Diagnosis:
    """An embedding that looks up other rows of the same weight (`forensics.lookups`): B's ids read back from its
    output, beside A's."""
    from burnside.forensics.lookups import shown

    module, b_name = lookup.module, comparison.side_name("b")
    positions = "position" in module.rsplit(".", 1)[-1].lower()
    what = "positions" if positions else "ids"
    ours, theirs = shown(lookup.a_ids), shown(lookup.b_ids)
    source = ("what A recorded feeding it" if lookup.a_source != "output" else "read back from A's output the same way")
    relation = {"offset": f"offset {lookup.offset:+d}", "input": f"{b_name}'s are {_ids_of(lookup.other)}",
                "clipped": f"A's clipped at {lookup.bound}", "other": ""}[lookup.how]
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {module} "
                f"({kind or 'Embedding'}) looks up other rows of the same weight: {b_name} looks up {what} {theirs} "
                f"where A's looks up {ours}{f' ({relation})' if relation else ''}. Each row of {b_name}'s output is a "
                f"row of the weight bit for bit, which gives the ids it looked up; A's are {source}")
    run = ".." in ours
    start = int(lookup.a_ids.reshape(-1)[0])
    arange = (f"`Tensor::<1, Int>::arange({start}..seq as i64{f' + {start}' if start else ''}, &device)` "
              "(reshaped to [1, seq] and expanded over the batch)")
    if lookup.how == "offset" and positions and run:
        fix = (f"count the positions from {start} as the PyTorch forward does, not from {start + lookup.offset}: "
               f"{module}'s ids are {arange}; with the offset every token gets the embedding of the position "
               f"{'after' if lookup.offset > 0 else 'before'} its own (an offset such as RoBERTa's padding_idx + 1 "
               "belongs to that model's position ids, not to this one's)")
    elif lookup.how == "offset":
        fix = (f"feed {module} the ids the PyTorch forward does: {b_name} adds {lookup.offset:+d} to them "
               f"({theirs} where PyTorch's are {ours})")
    elif lookup.how == "input":
        wanted = f"the position ids {ours}, {arange}" if positions and run else f"the ids {ours} ({lookup.a_source})"
        fix = (f"feed {module} {wanted}, as the PyTorch forward does, not {_ids_of(lookup.other)}: another "
               "input's ids passed in its place")
    elif lookup.how == "clipped":
        fix = (f"feed {module} the ids unclipped, as the PyTorch forward does: {b_name} clamps them at "
               f"{lookup.bound} (a `clamp`, or ids cut to a smaller vocabulary); the weight has {lookup.rows} rows")
    else:
        fix = (f"feed {module} the ids the PyTorch forward does ({ours}), not {theirs}: compare the code that makes "
               "them (the ids of another input, an offset or a slice)")
    return Diagnosis(ID, TITLE, evidence, fix)


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


def _layer_input(comparison: Comparison, first, side: str) -> list[Diagnosis]:
    """What one side fed a layer (both record `layer_inputs`) differs first: the code before the layer."""
    module = parse_name(first.name).rest
    return [Diagnosis(
        ID, TITLE,
        f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) from identical inputs and parameters: the input "
        f"{comparison.side_name(side)} feeds {module} already differs, before the layer runs",
        f"compare the code that computes {module}'s input with the PyTorch model's forward (a sum of embeddings, a "
        "residual, a reshape or transpose before the layer), not the layer itself",
    )]


#: Defaults of burn's layers that differ from the PyTorch module's, by the PyTorch class: the first things
#: to look at when that layer is where the forward parts.
_KNOWN_DEFAULTS = {
    "MultiheadAttention": ("; for this layer: burn's `MultiHeadAttentionConfig` drops 10% of the attention weights "
                           "by default where `nn.MultiheadAttention` drops none (`.with_dropout(0.0)`), and PyTorch's "
                           "layer reads [seq, batch, d_model] unless built with batch_first=True (burn's reads "
                           "[batch, seq, d_model])"),
}


#: The burn code that applies a parameterless PyTorch module, by class.
_BURN_OP = {
    "ReLU": "burn::tensor::activation::relu(x)", "GELU": "burn::tensor::activation::gelu(x)",
    "SiLU": "burn::tensor::activation::silu(x)", "Sigmoid": "burn::tensor::activation::sigmoid(x)",
    "Tanh": "burn::tensor::activation::tanh(x)", "LeakyReLU": "burn::tensor::activation::leaky_relu(x, slope)",
    "Softmax": "burn::tensor::activation::softmax(x, dim)",
    "MaxPool2d": "`MaxPool2dConfig::new(kernel).init().forward(x)`",
    "AvgPool2d": "`AvgPool2dConfig::new(kernel).init().forward(x)`",
}


def _operation_missing(comparison: Comparison, first, kind: str | None, module: str) -> Diagnosis | None:
    """A port recorded by graph capture: the first diverging module is a parameterless one (an activation, a pooling)
    and the operation of B's that stands for its output is of another kind (an Add where A applies a ReLU): B does
    not apply it there."""
    from burnside.compare.aligned import _OP_KINDS
    b_kind = comparison.captured_kinds.get(first.name)
    expected = _OP_KINDS.get(kind or "")
    if not b_kind or not expected or b_kind in expected:
        return None
    return Diagnosis(
        ID, TITLE,
        f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}); in {comparison.side_name('b')}'s captured graph "
        f"the tensor at {module} ({kind}) comes from {_article(b_kind)} {b_kind}, "
        f"and no {'/'.join(expected)} is applied to it: the "
        f"port leaves the {kind} out there",
        f"apply the {kind} where the PyTorch model does ({_BURN_OP.get(kind, kind)} on the {b_kind}'s result, e.g. "
        "`relu(x + identity)` for a residual block's tail)" if kind == "ReLU" else
        f"apply the {kind} where the PyTorch model does ({_BURN_OP.get(kind, kind)} on the {b_kind}'s result)")


def _article(word: str) -> str:
    return "an" if word[:1].upper() in "AEIOU" else "a"

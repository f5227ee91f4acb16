"""What masks and memory PyTorch's own attention layers were run with, and which one B's ran otherwise.

`nn.MultiheadAttention`, `nn.TransformerEncoderLayer` and `nn.TransformerDecoderLayer` compute their attention
inside `F.multi_head_attention_forward`: no module records the scores, and their masks are arguments
(`src_key_padding_mask`, `tgt_mask`, `memory_key_padding_mask`, ...) a trace does not hold. A port that leaves
the causal mask out, forgets a padding mask, inverts one (burn's `mask_pad` is true at padding) or feeds the
decoder's cross-attention another tensor than the encoder's output shows only as the layer's output parting.

Each attention of the layer at the first divergence is re-run here in numpy from A's recorded tensors (its
query input, its packed `in_proj_weight`, `out_proj`) and A's parameters, under the masks a port may build:
none, causal, the padding mask of an id tensor recorded at that step (the batch's ids, or the ids an embedding
was fed: padding where they are 0) or that mask inverted, each with or without the causal mask; a
cross-attention under each recorded tensor of the memory's shape as its keys and values. A's own masks are the
ones that reproduce A's recorded output of each attention (`layer_fit.VALID`). The whole layer is then re-run
(post-norm or pre-norm, ReLU or GELU: the form that reproduces A's layer output) with one attention's mask, or
the cross-attention's memory, changed at a time; the one that reproduces B's output, every other over 10 times
further off, is what B ran. Batch-first layers only, the first `SAMPLES` samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from burnside.compare.layers.layer_fit import ACTIVATIONS, FLOATS, VALID, params_step, read, relative
from burnside.trace import Trace

KINDS = ("MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer")
#: Samples re-run at most, tokens and width at most.
SAMPLES, TOKENS, WIDTH = 4, 1024, 2048
#: The masks of a self-attention; a cross-attention's have no causal part.
SELF_MASKS = ("none", "causal", "padding", "padding+causal", "inverted", "inverted+causal")
CROSS_MASKS = ("none", "padding", "inverted")
#: The id a padding mask marks.
PAD = 0
_MASKED = -1e30


@dataclass(frozen=True)
class Masking:
    """One attention's masks, and for a cross-attention the recorded tensor its keys and values are."""

    mask: str  # one of SELF_MASKS
    ids: str = ""  # the recorded ids its padding mask reads (`inputs.src`, `layer_inputs.embed#2`)
    memory: str = ""  # a cross-attention's keys and values: a recorded tensor's name

    def shown(self) -> str:
        """`a causal mask and the padding mask of inputs.src (id 0 masked)`."""
        pad = f"the padding mask of {self.ids} (id {PAD} masked)"
        inverted = f"the padding mask of {self.ids} inverted (every id but {PAD} masked)"
        return {"none": "no mask", "causal": "a causal mask", "padding": pad,
                "padding+causal": f"{pad} and a causal mask",
                "inverted": inverted, "inverted+causal": f"{inverted} and a causal mask"}[self.mask]


@dataclass
class LayerMasks:
    """The attention layer at the first divergence: A's masks, and the one change that gives B's output."""

    module: str
    kind: str
    step: int
    #: each attention's path (`decoder.layers.0.self_attn`) -> A's masking of it
    own: dict[str, Masking]
    a_residual: float
    #: the attention B ran otherwise and how, or None when no single change reproduces B's output
    changed: str | None
    b: Masking | None
    b_residual: float
    tried: int
    #: each attention's number of heads on A (`num_heads`), and B's for the one changed (its own when the change is
    #: a mask or the memory)
    heads: dict[str, int] = field(default_factory=dict)
    b_heads: int = 0

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "kind": self.kind, "step": self.step,
                "own": {m: {"mask": x.mask, "ids": x.ids, "memory": x.memory} for m, x in self.own.items()},
                "a_residual": self.a_residual, "changed": self.changed,
                "b": {"mask": self.b.mask, "ids": self.b.ids, "memory": self.b.memory} if self.b else None,
                "b_residual": self.b_residual, "tried": self.tried, "heads": self.heads, "b_heads": self.b_heads}


def _param(t: Trace, k: int, name: str) -> np.ndarray | None:
    return read(t, f"step{params_step(t, k)}.params_before.{name}")


def _mha(t: Trace, k: int, module: str, heads: int):
    """The attention of ``module`` (an `nn.MultiheadAttention`) as a function of query, keys and values inputs and
    the allowed [n, tq, tk] scores, on ``t``'s parameters; None without them."""
    w, b = _param(t, k, f"{module}.in_proj_weight"), _param(t, k, f"{module}.in_proj_bias")
    wo, bo = _param(t, k, f"{module}.out_proj.weight"), _param(t, k, f"{module}.out_proj.bias")
    if w is None or wo is None or w.ndim != 2 or w.shape[0] != 3 * w.shape[1] or w.shape[1] % heads:
        return None
    d = w.shape[1]
    bias = b if b is not None else np.zeros(3 * d)
    out_bias = bo if bo is not None else 0.0

    def run(xq: np.ndarray, xkv: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        n, tq, tk, hd = xq.shape[0], xq.shape[1], xkv.shape[1], d // heads
        q = (xq @ w[:d].T + bias[:d]).reshape(n, tq, heads, hd).transpose(0, 2, 1, 3)
        key = (xkv @ w[d:2 * d].T + bias[d:2 * d]).reshape(n, tk, heads, hd).transpose(0, 2, 1, 3)
        v = (xkv @ w[2 * d:].T + bias[2 * d:]).reshape(n, tk, heads, hd).transpose(0, 2, 1, 3)
        scores = np.where(allowed[:, None], q @ key.transpose(0, 1, 3, 2) / math.sqrt(hd), _MASKED)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        ctx = (scores / scores.sum(axis=-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(n, tq, d)
        out = ctx @ wo.T + out_bias
        out[~allowed.any(axis=-1)] = np.nan  # a query with every key masked: PyTorch gives NaN, ports other things
        return out
    return run


def _allowed(masking: Masking, n: int, tq: int, tk: int, ids: dict[str, np.ndarray]) -> np.ndarray | None:
    allowed = np.ones((n, tq, tk), dtype=bool)
    if masking.mask.endswith("causal"):
        if tq != tk:
            return None
        allowed &= np.tril(np.ones((tq, tk), dtype=bool))
    if masking.mask.startswith(("padding", "inverted")):
        keys = ids.get(masking.ids)
        if keys is None or keys.shape != (n, tk):
            return None
        tokens = keys != PAD
        allowed &= (tokens if masking.mask.startswith("padding") else ~tokens)[:, None, :]
    return allowed


def _ids(a: Trace, k: int, n: int) -> dict[str, np.ndarray]:
    """The integer [samples, tokens] tensors recorded at step ``k`` (the batch's ids, the ids an embedding was fed)
    that hold the padding id and something else: what a padding mask is built from. Each value once."""
    found: dict[str, np.ndarray] = {}
    for stage in ("inputs", "layer_inputs"):
        prefix = f"step{k}.{stage}."
        for name in a.names:
            if not name.startswith(prefix) or a.info(name).dtype not in ("I64", "I32", "U8", "I8", "I16", "U32"):
                continue
            shape = a.info(name).shape
            if len(shape) != 2 or shape[0] < n:
                continue
            values = np.asarray(a.values(name))[:n].astype(np.int64)
            if (values == PAD).any() and (values != PAD).any() and \
                    not any(np.array_equal(values, v) for v in found.values()):
                found[name.removeprefix(f"step{k}.")] = values
    return found


def _norm(t: Trace, k: int, module: str, eps: float):
    w, b = _param(t, k, f"{module}.weight"), _param(t, k, f"{module}.bias")

    def run(x: np.ndarray) -> np.ndarray:
        c = x - x.mean(axis=-1, keepdims=True)
        y = c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + eps)
        return y * (w if w is not None else 1.0) + (b if b is not None else 0.0)
    return run


def _linear(t: Trace, k: int, module: str):
    w, b = _param(t, k, f"{module}.weight"), _param(t, k, f"{module}.bias")
    if w is None:
        return None
    return lambda x: x @ w.T + (b if b is not None else 0.0)


def _layer(t: Trace, a: Trace, k: int, module: str, kind: str, heads: dict[str, int], norm_first: bool,
           activation: str):
    """The whole layer on ``t``'s parameters (settings from A's metadata) as a function of its input, the memory and
    each attention's masking; None without its parameters."""
    settings = a.metadata.get("module_settings") or {}
    names = ["self_attn"] + (["multihead_attn"] if kind == "TransformerDecoderLayer" else [])
    attn = {m: _mha(t, k, f"{module}.{m}", heads[f"{module}.{m}"]) for m in names}
    norms = {i: _norm(t, k, f"{module}.norm{i}", float((settings.get(f"{module}.norm{i}") or {}).get("eps", 1e-5)))
             for i in range(1, len(names) + 2)}
    l1, l2 = _linear(t, k, f"{module}.linear1"), _linear(t, k, f"{module}.linear2")
    if any(f is None for f in attn.values()) or l1 is None or l2 is None:
        return None
    act = ACTIVATIONS[activation]

    def run(x: np.ndarray, memory: np.ndarray | None, masks: dict[str, np.ndarray]) -> np.ndarray:
        def block(h: np.ndarray, i: int, f) -> np.ndarray:
            return h + f(norms[i](h)) if norm_first else norms[i](h + f(h))
        h = block(x, 1, lambda z: attn["self_attn"](z, z, masks["self_attn"]))
        if memory is not None:
            h = block(h, 2, lambda z: attn["multihead_attn"](z, memory, masks["multihead_attn"]))
        return block(h, len(names) + 1, lambda z: l2(act(l1(z))))
    return run


def _memories(a: Trace, k: int, module: str, order: list, n: int, d: int) -> dict[str, np.ndarray]:
    """A's tensors recorded before ``module`` at step ``k`` a cross-attention may read as keys and values
    ([samples, tokens, width]: module outputs and inputs, nearest first), each value once."""
    found: dict[str, np.ndarray] = {}
    before = order[:order.index(module)] if module in order else []
    for m in reversed(before):
        if m.startswith(module + "."):
            continue
        for stage in ("activations", "layer_inputs"):
            name = f"step{k}.{stage}.{m}"
            if name not in a or a.info(name).dtype not in FLOATS:
                continue
            shape = a.info(name).shape
            if len(shape) != 3 or shape[0] < n or shape[2] != d or shape[1] > TOKENS:
                continue
            value = read(a, name, lambda v: v[:n])
            if value is not None and not any(np.array_equal(value, v) for v in found.values()):
                found[name.removeprefix(f"step{k}.")] = value
    return found


def _fit(actual: np.ndarray, expected: np.ndarray) -> float:
    rows = np.all(np.isfinite(expected), axis=-1)
    if not rows.any():
        return math.inf
    return relative(actual[rows], expected[rows])


@dataclass
class _Probe:
    """What every re-run of the attention layer ``module`` at step ``k`` reads: A's and B's traces, the layer's
    input ``x`` and each side's output (the first ``n`` samples), the id tensors a padding mask may come from, the
    memories a cross-attention may read, the layer's attentions and A's number of heads of each."""

    a: Trace
    b: Trace
    module: str
    kind: str
    k: int
    n: int
    width: int
    x: np.ndarray
    y_a: np.ndarray
    y_b: np.ndarray
    ids: dict[str, np.ndarray]
    memories: dict[str, np.ndarray]
    attentions: list[str]
    heads: dict[str, int]

    def options(self, m: str) -> list[Masking]:
        """An attention module's maskings as a self-attention (keys and values its query input), then as a
        cross-attention of each memory; in a layer, its self-attention's the former, its cross-attention's the
        latter."""
        found = []
        keys = ([""] + list(self.memories) if self.kind == "MultiheadAttention" else list(self.memories)
                if m.endswith("multihead_attn") else [""])
        for memory in keys:
            for mask in (CROSS_MASKS if memory else SELF_MASKS):
                for name in (self.ids if "padding" in mask or "inverted" in mask else [""]):
                    found.append(Masking(mask, name, memory))
        return found

    def layer_masks(self, masks: dict[str, Masking]) -> dict[str, np.ndarray | None]:
        """Each attention's allowed positions under ``masks``, by its name in the layer (``self_attn``)."""
        x, memories = self.x, self.memories
        return {m.rsplit(".", 1)[1]: _allowed(masks[m], self.n, x.shape[1],
                                              (memories[masks[m].memory] if masks[m].memory else x).shape[1], self.ids)
                for m in self.attentions}

    def memory(self, masks: dict[str, Masking]) -> np.ndarray | None:
        """What the cross-attention reads under ``masks`` (None in a layer without one)."""
        return self.memories[masks[self.attentions[1]].memory] if len(self.attentions) > 1 else None


def _probe(a: Trace, b: Trace, first: str, module: str, kind: str, k: int) -> _Probe | None:
    """The layer's tensors, when ``first`` is the output of an attention layer of `KINDS` that both sides record
    within the bounds, A's heads are declared, and B's output is not A's within rounding."""
    order = a.metadata.get("activations")
    settings = a.metadata.get("module_settings") or {}
    source = f"step{k}.layer_inputs.{module}"
    if kind not in KINDS or not isinstance(order, list) or source not in a or first not in b or first not in a:
        return None
    shape = a.info(source).shape
    if len(shape) != 3 or a.info(first).shape != shape or b.info(first).shape != shape or shape[1] > TOKENS \
            or shape[2] > WIDTH or a.info(source).dtype not in FLOATS:
        return None
    n = min(shape[0], SAMPLES)
    part = lambda v: v[:n]
    x, y_a, y_b = read(a, source, part), read(a, first, part), read(b, first, part)
    if x is None or y_a is None or y_b is None or _fit(y_b, y_a) <= 10 * VALID:
        return None
    ids = _ids(a, k, n)
    attentions = [module] if kind == "MultiheadAttention" else \
        [f"{module}.self_attn"] + ([f"{module}.multihead_attn"] if kind == "TransformerDecoderLayer" else [])
    heads = {m: int((settings.get(m) or {}).get("num_heads", 0)) for m in attentions}
    if not all(heads.values()):
        return None
    memories = _memories(a, k, module, order, n, shape[2]) if kind != "TransformerEncoderLayer" else {}
    return _Probe(a, b, module, kind, k, n, shape[2], x, y_a, y_b, ids, memories, attentions, heads)


def _own_maskings(p: _Probe) -> dict[str, Masking] | None:
    """A's masking of each attention, from its own recorded query input and output (None when one is not
    reproduced)."""
    own: dict[str, Masking] = {}
    for m in p.attentions:
        part = lambda v: v[:p.n]
        q_in, out = read(p.a, f"step{p.k}.layer_inputs.{m}", part), read(p.a, f"step{p.k}.activations.{m}", part)
        run = _mha(p.a, p.k, m, p.heads[m])
        if q_in is None or out is None or run is None:
            return None
        for masking in p.options(m):
            kv = p.memories[masking.memory] if masking.memory else q_in
            allowed = _allowed(masking, p.n, q_in.shape[1], kv.shape[1], p.ids)
            if allowed is not None and kv.shape[0] == p.n and _fit(out, run(q_in, kv, allowed)) <= VALID:
                own[m] = masking
                break
        else:
            return None
    return own


def _attention_run(p: _Probe, own: dict[str, Masking]):
    """A lone attention on B's parameters (A's where B records none) as a function of its masks, and its residual
    from A's output under A's masks."""
    run_b = _mha(p.b, p.k, p.module, p.heads[p.module]) or _mha(p.a, p.k, p.module, p.heads[p.module])

    def whole(masks: dict[str, Masking]) -> np.ndarray | None:
        masking = masks[p.module]
        kv = p.memories.get(masking.memory, p.x) if masking.memory else p.x
        allowed = _allowed(masking, p.n, p.x.shape[1], kv.shape[1], p.ids)
        return None if allowed is None else run_b(p.x, kv, allowed)
    return whole, _fit(p.y_a, whole(own))


def _layer_run(p: _Probe, own: dict[str, Masking]):
    """The layer's form (post-norm or pre-norm, ReLU or GELU) that reproduces A's output under A's masks; the whole
    layer in that form on B's parameters (A's where B records none) as a function of its masks, its residual from
    A's output and the form (None when no form reproduces A's)."""
    for norm_first in (False, True):
        for activation in ("relu", "gelu"):
            layer_a = _layer(p.a, p.a, p.k, p.module, p.kind, p.heads, norm_first, activation)
            if layer_a is None:
                return None
            residual = _fit(p.y_a, layer_a(p.x, p.memory(own), p.layer_masks(own)))
            if residual <= VALID:
                layer_b = _layer(p.b, p.a, p.k, p.module, p.kind, p.heads, norm_first, activation) or layer_a
                break
        else:
            continue
        break
    else:
        return None

    def whole(masks: dict[str, Masking]) -> np.ndarray | None:
        allowed = {}
        for m in p.attentions:
            kv = p.memories[masks[m].memory] if masks[m].memory else p.x
            allowed[m.rsplit(".", 1)[1]] = _allowed(masks[m], p.n, p.x.shape[1], kv.shape[1], p.ids)
            if allowed[m.rsplit(".", 1)[1]] is None:
                return None
        return layer_b(p.x, p.memory(masks), allowed)
    return whole, residual, (norm_first, activation)


def _head_fit_output(p: _Probe, own: dict[str, Masking], m: str, count: int, form) -> np.ndarray | None:
    """The output with A's masks and ``count`` heads in the attention ``m`` (burn's
    `MultiHeadAttentionConfig::new(d_model, n_heads)`), on B's parameters (A's where B records none)."""
    changed = {**p.heads, m: count}
    if p.kind == "MultiheadAttention":
        run_h = _mha(p.b, p.k, p.module, count) or _mha(p.a, p.k, p.module, count)
        allowed = _allowed(own[m], p.n, p.x.shape[1], p.x.shape[1], p.ids)
        return None if run_h is None or own[m].memory or allowed is None else run_h(p.x, p.x, allowed)
    layer_h = _layer(p.b, p.a, p.k, p.module, p.kind, changed, *form) or _layer(p.a, p.a, p.k, p.module, p.kind,
                                                                                  changed, *form)
    if layer_h is None:
        return None
    masks = p.layer_masks(own)
    return layer_h(p.x, p.memory(own), masks) if all(v is not None for v in masks.values()) else None


def measure_masks(a: Trace, b: Trace, first: str, module: str, kind: str, k: int) -> LayerMasks | None:
    """A's masks of the attention layer ``module`` whose output ``first`` is the first divergence, and the one
    change of them that gives B's output; None when it is no such layer, A's own output is not reproduced, or B's
    is A's within rounding."""
    p = _probe(a, b, first, module, kind, k)
    if p is None:
        return None
    with np.errstate(all="ignore"):
        own = _own_maskings(p)
        if own is None:
            return None
        if kind == "MultiheadAttention":
            (whole, a_residual), form = _attention_run(p, own), None
        else:
            found = _layer_run(p, own)
            if found is None:
                return None
            whole, a_residual, form = found
        fits: dict[tuple[str, Masking, int], float] = {}
        for m in p.attentions:
            for masking in p.options(m):
                if masking == own[m]:
                    continue
                out = whole({**own, m: masking})
                if out is not None:
                    fits[(m, masking, p.heads[m])] = _fit(p.y_b, out)
        # with A's masks, another number of heads
        for m in p.attentions:
            for count in (h for h in range(1, min(p.width, 64) + 1) if p.width % h == 0 and h != p.heads[m]):
                out = _head_fit_output(p, own, m, count, form)
                if out is not None:
                    fits[(m, own[m], count)] = _fit(p.y_b, out)
    ranked = sorted(fits, key=fits.__getitem__)
    best = ranked[0] if ranked and fits[ranked[0]] <= VALID and (
        len(ranked) == 1 or fits[ranked[1]] > 10 * fits[ranked[0]]) else None
    return LayerMasks(module, kind, k, own, a_residual, best[0] if best else None, best[1] if best else None,
                      fits[best] if best else (min(fits.values()) if fits else math.inf), len(fits),
                      heads=p.heads, b_heads=best[2] if best else 0)


__all__ = ["KINDS", "LayerMasks", "Masking", "measure_masks"]

"""What a decoder's attention under a key/value cache did at the first divergence, re-run from the recorded
projections.

A Hugging Face-style decoder attention (`LlamaAttention` and its kin: a module whose class names `Attention`, with
`q_proj`, `k_proj`, `v_proj` and `o_proj` children and a rotary embedding) computes its scores inside its forward:
no module records them, and its slips under a cache show only as `o_proj`'s output parting at a step. The
attention of step k is re-run here in float64 from each side's own recorded projections of every step up to k (the
prefill, then each decode step's token: the keys and values a cache holds), rotated by A's rotary table (its
`inv_freq` buffer at the batches' `position_ids`, laid out as A's recorded cos table is), then `o_proj`'s weight.
A's recorded output is reproduced first (`layer_fit.VALID`: otherwise no claim). B's is then re-run as written
and with one change at a time a port makes (`VARIANTS`): the key/value heads tiled where grouped-query attention
repeats each in place, the prompt's causal mask at a decode step (not offset by the cache's length), no causal
mask, a cache that keeps the prompt's keys only (never appended), or appends each step's twice, another score
scale. The one change that reproduces B's output, every other over 10 times further off (`layer_fit.choose`), is
what B ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from burnside.compare.layers.layer_fit import VALID, choose, read, relative
from burnside.trace import Trace, parse_name

#: One change a port makes, and what it is (the first is the attention as PyTorch computes it).
VARIANTS = {
    "as_pytorch": "the attention as PyTorch computes it",
    "kv_tiled": "the key/value heads tiled (kv0, kv1, kv0, kv1, ...) where PyTorch repeats each in place "
                "(kv0, kv0, kv1, kv1, ...)",
    "mask_unshifted": "the prompt's causal mask at a decode step: query t sees keys 0..t of the cache, not "
                      "those up to its own position",
    "no_mask": "no causal mask: every query sees every key",
    "cache_not_appended": "a cache that holds the prompt's keys and values only: each decode step attends to the "
                          "prompt and its own token, not the tokens decoded in between",
    "cache_doubled": "a cache that appends each decode step's keys and values twice",
    "unscaled": "scores not scaled by 1/sqrt(head_dim)",
    "scaled_by_dim": "scores scaled by 1/head_dim instead of 1/sqrt(head_dim)",
}
#: Tokens of a step and heads x head_dim re-run at most.
TOKENS, WIDTH = 2048, 16384


@dataclass(frozen=True)
class DecodeAttention:
    """The attention at the first divergence: the change that reproduces B's output, with each form's residual."""

    module: str
    step: int
    heads: int
    kv_heads: int
    head_dim: int
    changed: str  # a key of VARIANTS other than "as_pytorch"
    residuals: dict[str, float]
    a_residual: float

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "step": self.step, "heads": self.heads, "kv_heads": self.kv_heads,
                "head_dim": self.head_dim, "changed": self.changed, "residuals": self.residuals,
                "a_residual": self.a_residual}


def _attention_of(a: Trace, first: str) -> tuple[str, int] | None:
    """The attention module whose output (or whose `o_proj`'s output) ``first`` is, and the step."""
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or parsed.stage != "activations" or not isinstance(modules, dict):
        return None
    module = parsed.rest.split("#", 1)[0]
    if module.endswith(".o_proj"):
        module = module.removesuffix(".o_proj")
    if "attention" not in str(modules.get(module, "")).lower():
        return None
    return module, parsed.step


def _rotary(a: Trace, attn: str) -> str | None:
    """A's rotary embedding module for ``attn``: its own child, else the model's one."""
    modules = a.metadata.get("modules") or {}
    rotary = [m for m, kind in modules.items() if "rotary" in str(kind).lower()]
    own = [m for m in rotary if m.startswith(f"{attn}.")]
    return (own or rotary or [None])[0]


def _rows(t: Trace, name: str) -> np.ndarray | None:
    """The first sample of a recorded [batch, tokens, features] tensor, as [tokens, features] in float64."""
    values = read(t, name, lambda v: v[0] if v.ndim == 3 else v)
    return values if values is not None and values.ndim == 2 else None


def _rope_tables(a: Trace, rotary: str, step: int, width: int
                 ) -> tuple[np.ndarray, np.ndarray, str] | None:
    """A's cos and sin tables of step ``step``'s positions ([tokens, width]) and their layout, from its `inv_freq`
    buffer, checked against the cos table A recorded."""
    inv_freq = read(a, f"step0.buffers.{rotary}.inv_freq")
    ids = f"step{step}.inputs.position_ids"
    recorded = _rows(a, f"step{step}.activations.{rotary}")
    if inv_freq is None or ids not in a or recorded is None or inv_freq.size * 2 != width \
            or recorded.shape[-1] != width:
        return None
    positions = np.asarray(a.values(ids), dtype=np.float64).reshape(-1)
    if positions.size != recorded.shape[0]:
        return None
    angles = positions[:, None] * inv_freq.reshape(-1)[None, :]
    for layout in ("rotate_half", "interleaved"):
        emb = np.concatenate([angles, angles], axis=1) if layout == "rotate_half" else np.repeat(angles, 2, axis=1)
        cos = np.cos(emb)
        # the table's scale (HF's `attention_scaling`, 1 but for some RoPE types): where the cosine is large
        large = np.abs(cos) > 0.5
        scale = float(np.median(recorded[large] / cos[large])) if large.any() else 1.0
        if np.max(np.abs(cos * scale - recorded)) <= 1e-5 * max(1.0, float(np.max(np.abs(positions)))):
            return cos * scale, np.sin(emb) * scale, layout
    return None


def _rotate(x: np.ndarray, layout: str) -> np.ndarray:
    """The partner of each feature of [heads, tokens, d] for RoPE: rotate_half's cat(-x2, x1), or interleaved
    pairs' (-x[2i+1], x[2i])."""
    if layout == "rotate_half":
        half = x.shape[-1] // 2
        return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    return np.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)


class _Side:
    """One side's recorded projections of an attention, step by step, rotated by A's tables."""

    def __init__(self, t: Trace, attn: str, steps: list[int], tables: dict, layout: str, dims: tuple[int, int, int],
                 scale: float):
        self.attn, self.layout, self.scale = attn, layout, scale
        self.heads, self.kv_heads, self.d = dims
        self.q: dict[int, np.ndarray] = {}
        self.k: dict[int, np.ndarray] = {}
        self.v: dict[int, np.ndarray] = {}
        self.complete = True
        # o_proj's parameters, read once for every variant the side is re-run with
        self.weight = read(t, f"step0.params_before.{attn}.o_proj.weight")
        self.bias = read(t, f"step0.params_before.{attn}.o_proj.bias")
        for j in steps:
            q, k, v = (_rows(t, f"step{j}.activations.{attn}.{p}_proj") for p in "qkv")
            if q is None or k is None or v is None or q.shape[1] != self.heads * self.d \
                    or k.shape[1] != self.kv_heads * self.d or v.shape != k.shape:
                self.complete = False
                return
            cos, sin = tables[j]
            self.q[j] = self._rope(q, self.heads, cos, sin)
            self.k[j] = self._rope(k, self.kv_heads, cos, sin)
            self.v[j] = v.reshape(v.shape[0], self.kv_heads, self.d).transpose(1, 0, 2)

    def _rope(self, x: np.ndarray, heads: int, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        x = x.reshape(x.shape[0], heads, self.d).transpose(1, 0, 2)  # [heads, tokens, d]
        return x * cos[None] + _rotate(x, self.layout) * sin[None]

    def output(self, step: int, positions: dict[int, np.ndarray], variant: str) -> np.ndarray | None:
        """`o_proj`'s output at ``step`` under ``variant``: [tokens, hidden]."""
        cached = list(range(step + 1))
        if variant == "cache_not_appended":
            cached = [0, step] if step > 0 else [0]
        elif variant == "cache_doubled":
            cached = [0] + [j for j in range(1, step + 1) for _ in (0, 1)]
        keys = np.concatenate([self.k[j] for j in cached], axis=1)
        values = np.concatenate([self.v[j] for j in cached], axis=1)
        key_positions = np.concatenate([positions[j] for j in cached])
        n_rep = self.heads // self.kv_heads
        if variant == "kv_tiled":
            keys, values = np.tile(keys, (n_rep, 1, 1)), np.tile(values, (n_rep, 1, 1))
        else:
            keys, values = np.repeat(keys, n_rep, axis=0), np.repeat(values, n_rep, axis=0)
        q = self.q[step]
        scale = {"unscaled": 1.0, "scaled_by_dim": 1.0 / self.d}.get(variant, self.scale)
        scores = q @ keys.transpose(0, 2, 1) * scale  # [heads, tokens, keys]
        tokens = q.shape[1]
        if variant == "no_mask":
            allowed = np.ones((tokens, keys.shape[1]), dtype=bool)
        elif variant == "mask_unshifted":
            allowed = np.tril(np.ones((tokens, keys.shape[1]), dtype=bool))
        else:
            allowed = key_positions[None, :] <= positions[step][:, None]
        scores = np.where(allowed[None], scores, -np.inf)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        ctx = (scores / scores.sum(axis=-1, keepdims=True)) @ values  # [heads, tokens, d]
        ctx = ctx.transpose(1, 0, 2).reshape(tokens, self.heads * self.d)
        if self.weight is None or self.weight.shape != (self.weight.shape[0], ctx.shape[1]):
            return None
        return ctx @ self.weight.T + (self.bias if self.bias is not None else 0.0)


def measure_decode_attention(a: Trace, b: Trace, first: str) -> DecodeAttention | None:
    """The one change of `VARIANTS` that reproduces B's output of the attention at ``first`` (its `o_proj`'s or
    its own output) at that step, where A's as PyTorch computes it reproduces A's; None otherwise (not such an
    attention, something not recorded, no single change, or B's as written)."""
    found = _attention_of(a, first)
    if found is None or a.kind != "forward":
        return None
    attn, step = found
    rotary = _rotary(a, attn)
    out = f"step{step}.activations.{attn}.o_proj"
    if rotary is None or out not in a or out not in b:
        return None
    settings = (a.metadata.get("module_settings") or {}).get(attn) or {}
    q0 = _rows(a, f"step0.activations.{attn}.q_proj")
    k0 = _rows(a, f"step0.activations.{attn}.k_proj")
    table0 = _rows(a, f"step0.activations.{rotary}")
    if q0 is None or k0 is None or table0 is None:
        return None
    d = settings.get("head_dim") if isinstance(settings.get("head_dim"), int) else table0.shape[-1]
    if d <= 0 or q0.shape[1] % d or k0.shape[1] % d or (q0.shape[1] // d) % (k0.shape[1] // d):
        return None
    heads, kv_heads = q0.shape[1] // d, k0.shape[1] // d
    if heads * d > WIDTH:
        return None
    steps = list(range(step + 1))
    tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    positions: dict[int, np.ndarray] = {}
    layout = ""
    for j in steps:
        made = _rope_tables(a, rotary, j, d)
        if made is None:
            return None
        cos, sin, layout = made
        if cos.shape[0] > TOKENS:
            return None
        tables[j] = (cos, sin)
        positions[j] = np.asarray(a.values(f"step{j}.inputs.position_ids"), dtype=np.float64).reshape(-1)
    # A's score scale: its attention's `scaling` where it records one (HF's; Gemma's is not 1/sqrt(head_dim))
    scale = settings.get("scaling")
    scale = float(scale) if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0 \
        else 1.0 / math.sqrt(d)
    ours = _Side(a, attn, steps, tables, layout, (heads, kv_heads, d), scale)
    theirs = _Side(b, attn, steps, tables, layout, (heads, kv_heads, d), scale)
    a_out, b_out = _rows(a, out), _rows(b, out)
    if not (ours.complete and theirs.complete) or a_out is None or b_out is None:
        return None
    mine = ours.output(step, positions, "as_pytorch")
    if mine is None or mine.shape != a_out.shape or relative(a_out, mine) > VALID:
        return None
    residuals: dict[str, float] = {}
    outputs: list[np.ndarray] = []
    for variant in VARIANTS:
        made = theirs.output(step, positions, variant)
        if made is None or made.shape != b_out.shape:
            return None
        if any(np.array_equal(made, seen) for seen in outputs):
            continue  # the same attention at this step (the prompt's mask at the prefill): not a form of its own
        outputs.append(made)
        residuals[variant] = relative(b_out, made)
    changed = choose(residuals)
    if changed is None or changed == "as_pytorch":
        return None
    return DecodeAttention(attn, step, heads, kv_heads, d, changed, residuals, relative(a_out, mine))

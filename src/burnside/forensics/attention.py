"""Scaled dot-product attention re-run in numpy, for `reads`: what an attention's output projection read.

A hand-written attention (nanoGPT's `c_attn`/`c_proj`, a ViT's `qkv`/`proj`, BERT's `query`/`key`/`value`)
records the projections before it and the output projection after it; what runs between them is not a module,
and its slips (the scale 1/sqrt(d_model) for 1/sqrt(head_dim), the causal mask left out, q, k and v taken in
another order from the packed projection, the softmax over the queries, another number of heads) change only
the output projection's input. Its sources are the nearest tensor recorded before the layer whose last axis is
three times the layer input's (a packed q, k, v, split in thirds) or three recorded module outputs of the layer
input's shape named as query, key and value (`q`, `query`, `q_proj`, `to_q`, `wq`, ...).

A's own attention is found first: the heads (each divisor of the width, 64 at most), the scale and the mask
whose attention of the sources reproduces A's recorded input of the layer (`layer_fit.VALID`), q, k, v in their
own order and the softmax over the keys. Then each variation of one setting of A's (`Variant`) is a candidate
of what B read. Batch-first inputs ``[batch, tokens, width]`` only, the rows `reads` compares (the first ones,
leading axes flattened).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from burnside.forensics.layer_fit import FLOATS, VALID, read, relative
from burnside.trace import Trace

#: The scales tried, by what a finding shows, as a function of (head_dim, d_model).
SCALES = {
    "1/sqrt(head_dim)": lambda hd, d: hd ** -0.5,
    "1/sqrt(d_model)": lambda hd, d: d ** -0.5,
    "1/head_dim": lambda hd, d: 1.0 / hd,
    "none": lambda hd, d: 1.0,
}
#: Most heads tried.
HEADS = 64
#: Tokens at most (attention reads every key of a query's sample).
TOKENS = 4096
_NAMES = {"q": ("q", "query", "wq", "q_lin"), "k": ("k", "key", "wk", "k_lin"), "v": ("v", "value", "wv", "v_lin")}


@dataclass(frozen=True)
class Variant:
    """One attention's settings: heads, scale, mask (`causal` or `none`), the order its q, k, v are taken from the
    sources (a permutation of "qkv": "kqv" takes the first third as k), and the softmax's axis."""

    heads: int
    scale: str
    mask: str
    order: str = "qkv"
    softmax: str = "keys"

    def shown(self, d_model: int) -> str:
        head_dim = d_model // self.heads
        scale = {"1/sqrt(head_dim)": f"scale 1/sqrt({head_dim})", "1/sqrt(d_model)": f"scale 1/sqrt({d_model})",
                 "1/head_dim": f"scale 1/{head_dim}", "none": "no scale"}[self.scale]
        mask = "causal mask" if self.mask == "causal" else "no mask"
        return (f"{self.heads} heads, {scale}, {mask}, {' '.join(self.order)} in that order, softmax over the "
                f"{self.softmax}")


def sources(a: Trace, k: int, module: str, order: list, x_shape: tuple[int, ...]) -> list[tuple[str, ...]] | None:
    """The recorded tensors the attention before ``module`` reads: one packed q, k, v (the nearest before it of
    width three times ``x_shape``'s) or three of its shape named as q, k and v; None when there are none."""
    if len(x_shape) < 3 or x_shape[-2] > TOKENS:
        return None
    before = order[:order.index(module)]
    for m in reversed(before):
        name = f"step{k}.activations.{m}"
        if name in a and a.info(name).dtype in FLOATS and a.info(name).shape == (*x_shape[:-1], 3 * x_shape[-1]):
            return [(name, m)]
    found: dict[str, tuple[str, str]] = {}
    for m in reversed(before):
        last = m.rsplit(".", 1)[-1].lower().removesuffix("_proj").removeprefix("to_")
        role = next((r for r, names in _NAMES.items() if last in names), None)
        name = f"step{k}.activations.{m}"
        if role is not None and role not in found and name in a and a.info(name).shape == x_shape:
            found[role] = (name, m)
    return [found[r] for r in "qkv"] if len(found) == 3 else None


def attend(parts: list[np.ndarray], variant: Variant, rows: int) -> np.ndarray:
    """The attention's output, [rows, d_model] (the first ``rows`` of the leading axes flattened), from
    ``parts``: one packed [n, tokens, 3 d_model] or q, k, v [n, tokens, d_model] each."""
    thirds = np.split(parts[0], 3, axis=-1) if len(parts) == 1 else parts
    taken = dict(zip(variant.order, thirds))
    q, k, v = taken["q"], taken["k"], taken["v"]
    n, tokens, d_model = q.shape
    head_dim = d_model // variant.heads
    split = lambda t: t.reshape(n, tokens, variant.heads, head_dim).transpose(0, 2, 1, 3)
    q, k, v = split(q), split(k), split(v)
    scores = q @ k.transpose(0, 1, 3, 2) * SCALES[variant.scale](head_dim, d_model)
    if variant.mask == "causal":
        scores = np.where(np.tril(np.ones((tokens, tokens), dtype=bool)), scores, -np.inf)
    axis = -1 if variant.softmax == "keys" else -2
    scores = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    weights = scores / np.sum(scores, axis=axis, keepdims=True)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(n, tokens, d_model)
    return out.reshape(-1, d_model)[:rows]


def variants(a: Trace, names: list[tuple[str, str]], x_a: np.ndarray, x_shape: tuple[int, ...],
             rows: int) -> tuple[list[str], dict[Variant, np.ndarray]] | None:
    """A's attention (the first variant whose output is A's recorded input ``x_a``) and each variation of one of
    its settings, with their outputs; None when no variant gives A's input."""
    tokens, d_model = x_shape[-2], x_shape[-1]
    samples = max(1, math.ceil(rows / tokens))
    parts = [read(a, name, lambda v: v.reshape(-1, *v.shape[-2:])[:samples]) for name, _ in names]
    if any(p is None for p in parts):
        return None
    heads = [h for h in range(1, min(HEADS, d_model) + 1) if d_model % h == 0]
    own = None
    for scale, mask, h in itertools.product(SCALES, ("causal", "none"), heads):
        variant = Variant(h, scale, mask)
        if relative(x_a, attend(parts, variant, rows)) <= VALID:
            own = variant
            break
    if own is None:
        return None
    found = {own: attend(parts, own, rows)}
    others = [replace(own, heads=h) for h in heads] + [replace(own, scale=s) for s in SCALES] + \
        [replace(own, mask=m) for m in ("causal", "none")] + \
        ([replace(own, order="".join(p)) for p in itertools.permutations("qkv")]) + \
        [replace(own, softmax="queries")]
    for variant in others:
        if variant not in found:
            out = attend(parts, variant, rows)
            if not any(np.array_equal(out, kept) for kept in found.values()):  # 1/sqrt(d_model) is 1/head_dim at 16
                found[variant] = out
    return [m for _, m in names], found

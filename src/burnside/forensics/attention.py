"""Scaled dot-product attention re-run in numpy, for `reads`: what an attention's output projection read.

A hand-written attention (nanoGPT's `c_attn`/`c_proj`, a ViT's `qkv`/`proj`, BERT's `query`/`key`/`value`)
records the projections before it and the output projection after it; what runs between them is not a module,
and its slips (the scale 1/sqrt(d_model) for 1/sqrt(head_dim), the causal mask left out, q, k and v taken in
another order from the packed projection, the softmax over the queries, another number of heads) change only
the output projection's input. Its sources are the nearest tensor recorded before the layer whose last axis is
three times the layer input's (a packed q, k, v, split in thirds) or three recorded module outputs of the layer
input's shape named as query, key and value (`q`, `query`, `q_proj`, `to_q`, `wq`, ...).

A Hugging Face attention (BERT's `BertSelfAttention`, separate `query`/`key`/`value` children) records its
context, the heads' concatenation ``[batch, tokens, width]``, as the self-attention module's own output, before
the output projection (`attention.output.dense`): there it is compared with the attention of its children as it
is (`reads.measure_reads`), no layer re-run.

The masks: causal, and the padding mask of the batch's input named `*mask*` (`attention_mask`, 1 at a token, 0 at
padding: the masked keys get a large negative score, as Hugging Face adds one), the two together, and the padding
mask inverted (a port that masks the tokens and attends to the padding; or PyTorch's own where its mask is 1 at
padding, `nn.Transformer`'s `key_padding_mask`).

A's own attention is found first: the heads (each divisor of the width, 64 at most), the scale and the mask
whose attention of the sources reproduces A's recorded input of the layer (`layer_fit.VALID`), q, k, v in their
own order and the softmax over the keys. Then each variation of one setting of A's (`Variant`) is a candidate
of what B read. Batch-first inputs ``[batch, tokens, width]`` only, the rows `reads` compares (the first ones,
leading axes flattened; `rows_needed` makes them reach the first padded sample).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from burnside.compare.layers.layer_fit import FLOATS, VALID, read, relative
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
#: Rows an attention is compared on at most, where they are to reach the first sample with padding.
PADDED_ROWS = 512
#: The masks tried: without a padding mask in the batch, the first two.
MASKS = ("causal", "none", "padding", "padding+causal", "inverted", "inverted+causal")
#: The score a masked key gets (Hugging Face adds float32's lowest; burn's `mask_fill` puts one in): the softmax gives
#: it no weight.
MASKED = -1e30


@dataclass(frozen=True)
class Variant:
    """One attention's settings: heads, scale, mask (`causal` or `none`), the order its q, k, v are taken from the
    sources (a permutation of "qkv": "kqv" takes the first third as k), and the softmax's axis."""

    heads: int
    scale: str
    mask: str  # one of `MASKS`
    order: str = "qkv"
    softmax: str = "keys"
    #: the batch's input the padding mask is read from (`attention_mask`), "" without one
    padding: str = ""

    def parts(self, d_model: int) -> dict[str, str]:
        """Each setting as a person reads it, by field: `scale` -> `scale 1/sqrt(8)`."""
        head_dim = d_model // self.heads
        scale = {"1/sqrt(head_dim)": f"scale 1/sqrt({head_dim})", "1/sqrt(d_model)": f"scale 1/sqrt({d_model})",
                 "1/head_dim": f"scale 1/{head_dim}", "none": "no scale"}[self.scale]
        pad = f"padding mask ({self.padding} 0 masked)"
        inverted = f"padding mask ({self.padding} 1 masked)"
        mask = {"causal": "causal mask", "none": "no mask", "padding": pad, "padding+causal": f"{pad} and causal mask",
                "inverted": inverted, "inverted+causal": f"{inverted} and causal mask"}[self.mask]
        return {"heads": f"{self.heads} heads", "scale": scale, "mask": mask,
                "order": f"{' '.join(self.order)} in that order", "softmax": f"softmax over the {self.softmax}"}

    def shown(self, d_model: int) -> str:
        return ", ".join(self.parts(d_model).values())

    def apart(self, other: Variant, d_model: int) -> list[tuple[str, str]]:
        """(this variant's, ``other``'s) setting, as shown, for each setting the two differ in."""
        mine, theirs = self.parts(d_model), other.parts(d_model)
        return [(mine[key], theirs[key]) for key in mine if mine[key] != theirs[key]]


def sources(a: Trace, k: int, module: str, order: list, x_shape: tuple[int, ...],
            within: bool = False) -> list[tuple[str, ...]] | None:
    """The recorded tensors the attention before ``module`` reads: one packed q, k, v (the nearest before it of
    width three times ``x_shape``'s) or three of its shape named as q, k and v; None when there are none.
    ``within``: only ``module``'s own children (an attention module's `query`, `key` and `value`)."""
    if len(x_shape) < 3 or x_shape[-2] > TOKENS:
        return None
    before = order[:order.index(module)]
    if within:
        before = [m for m in before if m.rsplit(".", 1)[0] == module]
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


def padding_mask(a: Trace, k: int, x_shape: tuple[int, ...]) -> tuple[str, np.ndarray] | None:
    """The batch's padding mask at step ``k``: an input named `*mask*` of ``x_shape``'s samples and tokens, 0 and 1
    only (1 at a token), as [samples, tokens] booleans with its input's name; None without one."""
    if len(x_shape) < 3:
        return None
    samples, tokens = math.prod(x_shape[:-2]), x_shape[-2]
    prefix = f"step{k}.inputs."
    for name in a.names:
        if not name.startswith(prefix) or "mask" not in name[len(prefix):].lower():
            continue
        shape = a.info(name).shape
        if len(shape) < 2 or shape[0] != x_shape[0] or shape[-1] != tokens or math.prod(shape) != samples * tokens:
            continue
        values = np.asarray(a.values(name)).reshape(samples, tokens)
        if values.dtype != np.bool_ and not np.all((values == 0) | (values == 1)):
            continue
        return name[len(prefix):], values.astype(bool)
    return None


def rows_needed(a: Trace, k: int, x_shape: tuple[int, ...], rows: int) -> int:
    """``rows``, or more to reach the end of the first sample with padding (`PADDED_ROWS` at most): an attention that
    leaves the padding mask out computes otherwise only there."""
    found = padding_mask(a, k, x_shape)
    if found is None:
        return rows
    padded = np.nonzero(~found[1].all(axis=1))[0]
    if not padded.size:
        return rows
    return max(rows, min((int(padded[0]) + 1) * x_shape[-2], PADDED_ROWS))


def attend(parts: list[np.ndarray], variant: Variant, rows: int, keys: np.ndarray | None = None) -> np.ndarray:
    """The attention's output, [rows, d_model] (the first ``rows`` of the leading axes flattened), from
    ``parts``: one packed [n, tokens, 3 d_model] or q, k, v [n, tokens, d_model] each; ``keys`` the padding mask's
    [n, tokens] (True at a token) for a variant that masks by it."""
    thirds = np.split(parts[0], 3, axis=-1) if len(parts) == 1 else parts
    taken = dict(zip(variant.order, thirds))
    q, k, v = taken["q"], taken["k"], taken["v"]
    n, tokens, d_model = q.shape
    head_dim = d_model // variant.heads
    split = lambda t: t.reshape(n, tokens, variant.heads, head_dim).transpose(0, 2, 1, 3)
    q, k, v = split(q), split(k), split(v)
    scores = q @ k.transpose(0, 1, 3, 2) * SCALES[variant.scale](head_dim, d_model)
    allowed = np.ones((n, 1, tokens, tokens), dtype=bool)
    if variant.mask.endswith("causal"):
        allowed &= np.tril(np.ones((tokens, tokens), dtype=bool))
    if variant.mask.startswith(("padding", "inverted")):
        if keys is None:
            raise ValueError("a padding mask's variant without the mask")
        by_key = keys[:n, None, None, :]
        allowed &= by_key if variant.mask.startswith("padding") else ~by_key
    scores = np.where(allowed, scores, MASKED)
    axis = -1 if variant.softmax == "keys" else -2
    scores = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    weights = scores / np.sum(scores, axis=axis, keepdims=True)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(n, tokens, d_model)
    if variant.softmax == "keys":
        # a query with every key masked (the padding mask inverted, on a sample without padding): PyTorch's SDPA
        # gives it zeros, a burn `mask_fill` of a finite value the mean of the values, one of -inf NaN; it says
        # nothing of the mask, and is left out of the fit (NaN, `reads`)
        out[~allowed[:, 0].any(axis=-1)] = np.nan
    return out.reshape(-1, d_model)[:rows]


def variants(a: Trace, names: list[tuple[str, str]], x_a: np.ndarray, x_shape: tuple[int, ...],
             rows: int, k: int | None = None) -> tuple[list[str], dict[Variant, np.ndarray]] | None:
    """A's attention (the first variant whose output is A's recorded input ``x_a``) and each variation of one of
    its settings, with their outputs; None when no variant gives A's input. ``k``: the step whose batch's padding
    mask (`padding_mask`) the masks may use."""
    tokens, d_model = x_shape[-2], x_shape[-1]
    samples = max(1, math.ceil(rows / tokens))
    parts = [read(a, name, lambda v: v.reshape(-1, *v.shape[-2:])[:samples]) for name, _ in names]
    if any(p is None for p in parts):
        return None
    found_mask = padding_mask(a, k, x_shape) if k is not None else None
    keys = found_mask[1][:samples] if found_mask is not None else None
    padding = found_mask[0] if found_mask is not None else ""
    masks = MASKS if keys is not None else MASKS[:2]
    heads = [h for h in range(1, min(HEADS, d_model) + 1) if d_model % h == 0]
    own = None
    for scale, mask, h in itertools.product(SCALES, masks, heads):
        variant = Variant(h, scale, mask, padding=padding)
        if relative(x_a, attend(parts, variant, rows, keys)) <= VALID:
            own = variant
            break
    if own is None:
        return None
    found = {own: attend(parts, own, rows, keys)}
    others = [replace(own, heads=h) for h in heads] + [replace(own, scale=s) for s in SCALES] + \
        [replace(own, mask=m) for m in masks] + \
        ([replace(own, order="".join(p)) for p in itertools.permutations("qkv")]) + \
        [replace(own, softmax="queries")]
    for variant in others:
        if variant not in found:
            out = attend(parts, variant, rows, keys)
            # 1/sqrt(d_model) is 1/head_dim at 16
            if not any(np.array_equal(out, kept, equal_nan=True) for kept in found.values()):
                found[variant] = out
    return [m for _, m in names], found

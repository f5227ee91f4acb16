"""The positions a rotary embedding computed its table for, read back from its output rows.

A rotary embedding module (`LlamaRotaryEmbedding` and its kin: a class named `*Rotary*`) outputs the cos table of
each token's position, one row per token; its value depends on the position alone. Every row A recorded, at every
step, is the row of a known position (the batch's `position_ids`), so a row of B's output is read back as the
position whose row it is, bit for bit or within rounding. A decode step whose positions restart at 0 under the
cache gives rows of positions 0, 1, ... where PyTorch's are the cache's length onwards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from burnside.compare.layers.layer_fit import FLOATS, read
from burnside.trace import Trace, parse_name

#: How close (relative to the table's largest value) a row must be to A's row of a position to be that position's.
_CLOSE = 1e-6


#: RoPE's theta tried (besides A's own, from its `inv_freq` buffer): the usual ones.
THETAS = (10000.0, 500000.0, 1000000.0, 100000.0, 50000.0, 250000.0)
#: How a cos table lays out a head's frequencies: Hugging Face's rotate_half repeats them in two halves
#: (f0 .. f(d/2-1), f0 .. f(d/2-1)); interleaved pairs (burn's `RotaryEncoding`) repeat each (f0, f0, f1, f1, ...).
LAYOUTS = ("rotate_half", "interleaved")


@dataclass(frozen=True)
class RopeForm:
    """A rotary table's form on each side: its layout (`LAYOUTS`), theta and frequency scaling (A's `rope_type`,
    `llama3` say, where its `inv_freq` is not theta^(-2i/d); "" for none)."""

    module: str
    step: int
    a: tuple[str, float, str]
    b: tuple[str, float, str]
    #: how many times A's lowest frequency is below theta^(-2i/d)'s (the scaling's factor), 1 without scaling
    factor: float = 1.0

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "step": self.step, "a": list(self.a), "b": list(self.b),
                "factor": self.factor}


def _geometric(width: int, theta: float) -> np.ndarray:
    """RoPE's inverse frequencies theta^(-2i/d) of a head of ``width``."""
    return theta ** (-np.arange(0, width, 2, dtype=np.float64) / width)


def _table(positions: np.ndarray, layout: str, freqs: np.ndarray) -> np.ndarray:
    """The cos table of ``positions`` ([tokens, 2 x frequencies]) for RoPE of this layout and inverse frequencies."""
    expanded = np.concatenate([freqs, freqs]) if layout == "rotate_half" else np.repeat(freqs, 2)
    return np.cos(positions.astype(np.float64)[:, None] * expanded[None, :])


def _form(rows: np.ndarray, positions: np.ndarray, candidates: list[tuple[float, str, np.ndarray]]
          ) -> tuple[str, float, str] | None:
    """The one (layout, theta, scaling) of the ``candidates`` (theta, scaling, inverse frequencies) whose table of
    ``positions`` is ``rows`` within float32 rounding while every other is over 10 times further off, or None."""
    tolerance = 1e-5 * max(1.0, float(np.max(positions)))
    residuals = {(layout, theta, scaling): float(np.max(np.abs(_table(positions, layout, freqs) - rows)))
                 for layout in LAYOUTS for theta, scaling, freqs in candidates if rows.shape[-1] == 2 * freqs.size}
    ranked = sorted(residuals, key=residuals.__getitem__)
    if not ranked or residuals[ranked[0]] > tolerance:
        return None
    return ranked[0] if len(ranked) == 1 or residuals[ranked[1]] > 10 * max(residuals[ranked[0]], 1e-12) else None


def measure_rope_form(a: Trace, b: Trace, first: str) -> RopeForm | None:
    """Each side's RoPE layout, theta and frequency scaling at the rotary embedding whose output ``first`` (a cos
    table) is the first divergence, fitted on the step's positions; None where either is not one form of `LAYOUTS`,
    the thetas tried and A's own scaled frequencies, or the two agree."""
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or parsed.stage != "activations" or not isinstance(modules, dict) or first not in b:
        return None
    module = parsed.rest
    if "rotary" not in str(modules.get(module.split("#", 1)[0], "")).lower():
        return None
    ids = f"step{parsed.step}.inputs.position_ids"
    ours, theirs = read(a, first), read(b, first)
    if ids not in a or ours is None or theirs is None or ours.shape != theirs.shape or ours.ndim < 2:
        return None
    positions = np.asarray(a.values(ids)).reshape(-1)
    ours, theirs = ours.reshape(-1, ours.shape[-1]), theirs.reshape(-1, theirs.shape[-1])
    if ours.shape[0] != positions.size or ours.shape[-1] % 2:
        return None
    width = ours.shape[-1]
    thetas = list(THETAS)
    inv_freq = read(a, f"step0.buffers.{module}.inv_freq")
    scaled: tuple[float, str, np.ndarray] | None = None
    factor = 1.0
    if inv_freq is not None and inv_freq.size * 2 == width and inv_freq.size > 1 and 0 < inv_freq.reshape(-1)[1] < 1:
        # inv_freq[i] = theta^(-2i/d): A's own theta, first (a scaling such as llama3's leaves the highest
        # frequencies as they are)
        own = float(f"{float(inv_freq.reshape(-1)[1]) ** (-width / 2):.4g}")
        thetas.insert(0, own)
        plain = _geometric(width, own)
        freqs = inv_freq.reshape(-1)
        if np.max(np.abs(freqs - plain) / plain) > 1e-4:
            settings = (a.metadata.get("module_settings") or {}).get(module.split("#", 1)[0]) or {}
            kind = settings.get("rope_type") if isinstance(settings.get("rope_type"), str) else "scaled"
            scaled = (own, kind, freqs)
            factor = float(plain[-1] / freqs[-1])
    candidates = [(theta, "", _geometric(width, theta)) for theta in dict.fromkeys(thetas)]
    if scaled is not None:
        candidates.insert(0, scaled)
    mine, other = _form(ours, positions, candidates), _form(theirs, positions, candidates)
    if mine is None or other is None or mine == other:
        return None
    return RopeForm(module, parsed.step, mine, other, factor)


@dataclass(frozen=True)
class Positions:
    """A rotary embedding's positions on each side at the first divergence."""

    module: str
    step: int
    a: list[int]
    b: list[int]

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "step": self.step, "a": self.a, "b": self.b}


def measure_positions(a: Trace, b: Trace, first: str) -> Positions | None:
    """B's positions at the rotary embedding whose output ``first`` is the first divergence, read back from A's rows
    of known positions (each step's batch `position_ids`); None for another module, or without positions."""
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or parsed.stage != "activations" or not isinstance(modules, dict):
        return None
    module = parsed.rest
    if "rotary" not in str(modules.get(module.split("#", 1)[0], "")).lower() or first not in b:
        return None
    table: dict[int, np.ndarray] = {}
    for k in range(a.steps):
        out, ids = f"step{k}.activations.{module}", f"step{k}.inputs.position_ids"
        if out not in a or ids not in a or a.info(out).dtype not in FLOATS:
            continue
        rows = read(a, out)
        positions = np.asarray(a.values(ids)).reshape(-1)
        if rows is None or rows.ndim < 2:
            continue
        rows = rows.reshape(-1, rows.shape[-1])
        if rows.shape[0] != positions.size:
            continue
        for position, row in zip(positions.tolist(), rows, strict=True):
            table.setdefault(int(position), row)
    own = f"step{parsed.step}.inputs.position_ids"
    ours = read(b, first)
    if not table or own not in a or ours is None:
        return None
    scale = max(float(np.max(np.abs(r))) for r in table.values()) or 1.0
    known = sorted(table)
    stacked = np.stack([table[p] for p in known])
    found: list[int] = []
    for row in ours.reshape(-1, ours.shape[-1]):
        if row.shape[0] != stacked.shape[1]:
            return None
        gaps = np.max(np.abs(stacked - row), axis=1)
        best = int(np.argmin(gaps))
        if gaps[best] > _CLOSE * scale:
            # a row of no position A recorded: the table is of another form or frequency (RoPE's pairs interleaved,
            # another theta), not of other positions
            return None
        found.append(known[best])
    return Positions(module, parsed.step, [int(p) for p in np.asarray(a.values(own)).reshape(-1)], found)

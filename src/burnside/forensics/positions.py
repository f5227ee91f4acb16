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

from burnside.forensics.layer_fit import FLOATS, read
from burnside.trace import Trace, parse_name

#: How close (relative to the table's largest value) a row must be to A's row of a position to be that position's.
_CLOSE = 1e-6


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

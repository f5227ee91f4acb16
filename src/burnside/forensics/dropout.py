"""A dropout that is on for one side only, measured from the tensor where the forward parts.

A dropout in training mode zeroes each element with probability p and scales the rest by
1 / (1 - p). When the other side's dropout is off (a forward trace's PyTorch side in eval mode, a
training trace recorded with dropout off), one side's values are then the other's, elementwise,
either zeroed or multiplied by one common factor: the factor measures p, and the share of elements
zeroed must agree with it (a binomial draw). Both sides' dropouts on draw different masks, and
elements zeroed on each side break the pattern: nothing is measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from burnside.forensics.layer_fit import read, relative
from burnside.trace import Trace, parse_name

#: PyTorch's dropout module classes.
DROPOUT = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")
#: The kept elements are the other side's times the factor within this (relative): rounding of one multiply.
SCALED = 1e-5
#: Elements read at most (the first ones, flat).
SAMPLE = 1 << 20


@dataclass(frozen=True)
class DropoutForensics:
    """One side's values are the other's with a dropout applied."""

    tensor: str  # the diverging tensor: `step0.activations.block.drop`
    module: str  # the dropout module it is (or holds, or follows): `block.drop`
    side: str  # "a" or "b": the side whose dropout is on
    p: float  # measured from the factor: 1 - 1 / scale
    scale: float  # the common factor of the kept elements
    zeroed: int  # elements zeroed of those the other side has nonzero
    n: int  # elements the other side has nonzero (read)
    residual: float  # relative residual of the kept elements against factor * the other side's

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"tensor": self.tensor, "module": self.module, "side": self.side, "p": self.p, "scale": self.scale,
                "zeroed": self.zeroed, "n": self.n, "residual": self.residual}


def _dropout_module(a: Trace, module: str) -> str | None:
    """The dropout ``module`` is, holds (its last), or follows in A's execution order; None when the model has none."""
    modules = a.metadata.get("modules")
    if not isinstance(modules, dict):
        return None
    if modules.get(module) in DROPOUT:
        return module
    inside = [m for m, kind in modules.items() if kind in DROPOUT and m.startswith(module + ".")]
    if inside:
        return inside[-1]
    order = a.metadata.get("activations")
    if isinstance(order, list) and module in order:
        before = [m for m in order[:order.index(module)] if modules.get(m) in DROPOUT]
        if before:
            return before[-1]
    return None


def _masked(source: np.ndarray, masked: np.ndarray) -> tuple[float, int, int, float] | None:
    """(scale, zeroed, n, residual) when ``masked`` is ``source`` with a dropout applied, else None."""
    nonzero = source != 0
    if np.any(masked[~nonzero] != 0):
        return None
    n = int(np.count_nonzero(nonzero))
    zero = nonzero & (masked == 0)
    zeroed = int(np.count_nonzero(zero))
    kept = nonzero & ~zero
    if zeroed == 0 or not np.any(kept):
        return None
    ratio = masked[kept] / source[kept]
    scale = float(np.median(ratio))
    if not math.isfinite(scale) or scale <= 1:
        return None
    residual = relative(masked[kept], scale * source[kept])
    if residual > SCALED:
        return None
    p = 1 - 1 / scale
    # the share zeroed is a binomial draw with probability p
    if abs(zeroed / n - p) > max(0.02, 5 * math.sqrt(p * (1 - p) / n)):
        return None
    return scale, zeroed, n, residual


def measure_dropout(a: Trace, b: Trace, first: str) -> DropoutForensics | None:
    """Whether the tensor ``first`` (an activation where the forward parts) is one side's values with a
    dropout applied to the other's, in a model that has a dropout there."""
    parsed = parse_name(first)
    if parsed is None or parsed.stage != "activations" or first not in a or first not in b:
        return None
    module = _dropout_module(a, parsed.rest)
    if module is None or a.info(first).shape != b.info(first).shape:
        return None
    flat = lambda v: v.reshape(-1)[:SAMPLE]
    x, y = read(a, first, flat), read(b, first, flat)
    if x is None or y is None:
        return None
    with np.errstate(all="ignore"):
        for side, source, masked in (("b", x, y), ("a", y, x)):
            found = _masked(source, masked)
            if found is not None:
                scale, zeroed, n, residual = found
                return DropoutForensics(first, module, side, 1 - 1 / scale, scale, zeroed, n, residual)
    return None

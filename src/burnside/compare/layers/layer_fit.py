"""What the layer fits share: a float tensor read in float64, the residual of a formula, and one side's
measurement (`Fit`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from burnside.trace import Trace

#: A layer formula reproduces a side's output when it is within this of it (max |diff| over max
#: |output|). Faithful f32 layers measured at most 3.7e-7 (the examples' BatchNorm, ln1 and GELU on
#: both frameworks); the residual sum the transformer's ln2 reads gives 1.66, the other GELU form
#: 1.4e-4.
VALID = 1e-5
FLOATS = ("F32", "F64", "F16", "BF16")


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gated(x: np.ndarray, scale: float, numerator=None) -> np.ndarray:
    """``numerator / (1 + exp(-scale x))``: x sigmoid(scale x) (SiLU, the quick GELU), or the sigmoid (1)."""
    with np.errstate(over="ignore"):  # exp(-x) of a large negative x is inf, and x / inf the 0 it should be
        return (x if numerator is None else numerator) / (1 + np.exp(-scale * x))


#: Elementwise activations as numpy formulas, by name: GELU's measure (`norms`) and what a layer read (`reads`)
#: try the same ones.
ACTIVATIONS = {
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: _gated(x, 1.0),
    "quick_gelu": lambda x: _gated(x, 1.702),
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "sigmoid": lambda x: _gated(x, 1.0, 1),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "elu": lambda x: np.where(x >= 0, x, np.expm1(np.minimum(x, 0.0))),
    "mish": lambda x: x * np.tanh(np.logaddexp(0.0, x)),
    "identity": lambda x: x,
}


@dataclass
class Fit:
    """One side's measurement: what it measured, its residuals, and A's values to try on it too."""

    measured: dict[str, float | str]
    residuals: dict[str, float]
    against: dict[str, float | str]


def read(trace: Trace, name: str, part=None) -> np.ndarray | None:
    """A float tensor of ``trace`` in float64, or None; ``part(array)`` picks the slice to convert
    first, so a big activation is never widened whole."""
    if name not in trace or trace.info(name).dtype not in FLOATS or trace.info(name).n == 0:
        return None
    values = trace.values(name)
    values = np.array(values if part is None else part(values), dtype=np.float64)
    trace.release(name)
    return values


def params_step(trace: Trace, k: int) -> int:
    """The step whose `params_before` hold step ``k``'s parameters: ``k`` in a training trace, 0 in a
    forward trace (the parameters are recorded once, as loaded)."""
    return 0 if trace.kind == "forward" else k


def relative(actual: np.ndarray, expected: np.ndarray) -> float:
    """max|actual - expected| over max|actual|."""
    size = float(np.max(np.abs(actual))) if actual.size else 0.0
    err = float(np.max(np.abs(actual - expected))) if actual.size else math.inf
    return err / size if size > 0 else (0.0 if err == 0 else math.inf)


def choose(residuals: dict[str, float]) -> str | None:
    """The form whose residual reproduces the output, when every other form's is over 10 times larger."""
    ranked = sorted(residuals, key=residuals.__getitem__)
    best = ranked[0]
    if len(ranked) < 2:
        return best if residuals[best] <= VALID else None
    return best if residuals[best] <= VALID and residuals[ranked[1]] > 10 * residuals[best] else None

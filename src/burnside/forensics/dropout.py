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

from burnside.compare.layers.layer_fit import read, relative
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
    #: where the mask was measured when not at ``tensor``: a tapped dropout's output on the side's own tensors,
    #: its input the activation before it (``tensor`` is then a layer with a dropout inside that no tap shows,
    #: burn's MultiHeadAttention, on an autodiff device, where every dropout is on)
    at: str | None = None
    #: the activation that dropout was measured against (its input, on the same side), with ``at``
    source: str | None = None

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"tensor": self.tensor, "module": self.module, "side": self.side, "p": self.p, "scale": self.scale,
                "zeroed": self.zeroed, "n": self.n, "residual": self.residual, "at": self.at, "source": self.source}


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
    own = _inside_on_autodiff(a, b, parsed.step, parsed.rest, first)
    if own is not None:
        return own
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


def _holds_a_dropout(kind: object) -> bool:
    """A PyTorch class with a dropout inside that is no module of its own (`nn.MultiheadAttention`'s
    `dropout=`, and burn's MultiHeadAttention, 0.1 by default), or one named for a dropout."""
    return isinstance(kind, str) and (kind == "MultiheadAttention" or "dropout" in kind.lower())


def _inside_on_autodiff(a: Trace, b: Trace, step: int, module: str, first: str) -> DropoutForensics | None:
    """The first divergence is the output of a layer holding a dropout that no tap shows, on a side whose
    trace says mode autodiff (burn's dropouts are on there): that side's dropouts are on when a tapped dropout
    module's output, on its own tensors, is the activation before it (A recorded exactly that feeding the
    dropout) zeroed and scaled by 1/(1 - p). The layer's own dropout is not measured: the one tapped is."""
    modules, order = a.metadata.get("modules"), a.metadata.get("activations")
    if not isinstance(modules, dict) or not isinstance(order, list) or not _holds_a_dropout(modules.get(module)) \
            or modules.get(module) in DROPOUT:
        return None
    for side, trace in (("b", b), ("a", a)):
        if trace.metadata.get("mode") != "autodiff":
            continue
        for i, tapped in enumerate(order):
            if i == 0 or modules.get(tapped) not in DROPOUT:
                continue
            out, before = f"step{step}.activations.{tapped}", f"step{step}.activations.{order[i - 1]}"
            fed = dropout_input(a, out)
            if out not in trace or before not in trace or fed is None or fed.input_is_before is not True \
                    or trace.info(out).shape != trace.info(before).shape:
                continue
            flat = lambda v: v.reshape(-1)[:SAMPLE]
            x, y = read(trace, before, flat), read(trace, out, flat)
            if x is None or y is None:
                continue
            with np.errstate(all="ignore"):
                found = _masked(x, y)
            if found is not None:
                scale, zeroed, n, residual = found
                return DropoutForensics(first, module, side, 1 - 1 / scale, scale, zeroed, n, residual, at=out,
                                        source=before)
    return None


@dataclass(frozen=True)
class DropoutInput:
    """What feeds the dropout at the first divergence, as A recorded it."""

    module: str  # the dropout module: `layers.0.dropout`
    input: str  # A's recorded input of it: `step0.layer_inputs.layers.0.dropout`
    before: str | None  # the activation before it in A's execution order: `step0.activations.layers.0.linear1`
    #: whether A's recorded input is exactly that activation's output, bit for bit (False: something computed
    #: between them feeds the dropout, a functional ReLU or GELU, a residual; None: not told)
    input_is_before: bool | None

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "input": self.input, "before": self.before,
                "input_is_before": self.input_is_before}


def dropout_input(a: Trace, first: str) -> DropoutInput | None:
    """For a first divergence at a dropout module's output: A's recorded input of it (`layer_inputs`) and
    whether that is the activation recorded before it; None when it is no dropout's output or A recorded no
    input of it."""
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or parsed.stage != "activations" or not isinstance(modules, dict):
        return None
    module = parsed.rest
    source = f"step{parsed.step}.layer_inputs.{module}"
    if modules.get(module) not in DROPOUT or source not in a:
        return None
    order = a.metadata.get("activations")
    if not isinstance(order, list) or module not in order or order.index(module) == 0:
        return DropoutInput(module, source, None, None)
    before = f"step{parsed.step}.activations.{order[order.index(module) - 1]}"
    if before not in a:
        return DropoutInput(module, source, before, None)
    if a.info(before).shape != a.info(source).shape or a.info(before).dtype != a.info(source).dtype:
        return DropoutInput(module, source, before, False)
    same = bool(np.array_equal(np.asarray(a.values(before)), np.asarray(a.values(source)), equal_nan=True))
    a.release(before)
    a.release(source)
    return DropoutInput(module, source, before, same)

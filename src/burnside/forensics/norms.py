"""Normalization and activation layers measured from one side's tensors: BatchNorm's epsilon and
momentum, LayerNorm's epsilon, GELU's form.

- BatchNorm (training mode), per channel c of the input x (batch mean m_c, biased variance v_c
  over the batch and spatial axes) and output y: ``y = (x - m_c) / sqrt(v_c + eps) * w_c + b_c``,
  so ``s_c = sqrt(v_c + eps)`` is the least-squares slope of ``x - m_c`` on ``(y - b_c) / w_c``
  and ``eps_c = s_c^2 - v_c``; epsilon is the median over channels. The momentum from the
  running mean: ``rm_after - rm_before = momentum * (m - rm_before)``, rm_before the previous
  step's buffer (PyTorch's and burn's initial running mean is 0).
- LayerNorm: the same over the weight's trailing dimensions, one group per row.
- GELU: which of the exact erf form and the tanh approximation reproduces the output.
"""

from __future__ import annotations

import math

import numpy as np

from burnside.forensics.layer_fit import VALID, Fit, choose, read, relative
from burnside.trace import Trace

#: The running mean's move is reproduced within this (relative to the move) by a measured momentum.
#: Both examples' sides measured at most 3.1e-7.
MOMENTUM_VALID = 1e-3
#: BatchNorm channels (each read whole: its batch statistics) and LayerNorm rows measured at most:
#: a setting shows in every one.
CHANNELS = 8
ROWS = 64
#: GELU elements read at most (the first ones, flat).
SAMPLE = 1 << 16

BATCHNORM = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")
KINDS = (*BATCHNORM, "LayerNorm", "GELU")
_erf = np.vectorize(math.erf, otypes=[np.float64])


def measure_norm_or_activation(trace: Trace, kind: str, module: str, k: int, source: str, fit: Fit) -> None:
    """Measure one BatchNorm, LayerNorm or GELU of ``trace`` at step ``k`` from its input ``source``."""
    output = f"step{k}.activations.{module}"
    if source not in trace or output not in trace or trace.info(source).shape != trace.info(output).shape:
        return  # a BatchNorm's momentum also needs the output: it tells training mode from eval mode
    shape = trace.info(source).shape
    if kind == "GELU":
        first = lambda v: v.reshape(-1)[:SAMPLE]
        x, y = read(trace, source, first), read(trace, output, first)
        if x is not None and y is not None:
            _gelu(x, y, fit.measured, fit.residuals)
        return
    owner = module.split("#", 1)[0]
    w = read(trace, f"step{k}.params_before.{owner}.weight")
    bias = read(trace, f"step{k}.params_before.{owner}.bias")
    if kind in BATCHNORM:
        if len(shape) < 2:
            return
        channels = lambda v: np.moveaxis(v, 1, 0)[:CHANNELS]
        x, y = read(trace, source, channels), read(trace, output, channels)
        if x is not None and y is not None:
            _batchnorm(trace, module, k, shape[1], x, y, w, bias, fit)
        return
    normalized = w.shape if w is not None else shape[-1:]
    if tuple(shape[len(shape) - len(normalized):]) != normalized:
        return
    size = math.prod(normalized)
    rows = lambda v: v.reshape(-1, size)[:ROWS]
    x, y = read(trace, source, rows), read(trace, output, rows)
    if x is not None and y is not None:
        _layernorm(x, y, normalized, w, bias, fit)


def _gelu(x: np.ndarray, y: np.ndarray, measured: dict, residuals: dict) -> None:
    forms = {"erf": 0.5 * x * (1 + _erf(x / math.sqrt(2))),
             "tanh": 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))}
    residuals.update({form: relative(y, expected) for form, expected in forms.items()})
    # the forms agree where |x| is small or large: only an input that tells them apart says which
    form = choose(residuals)
    if form is not None:
        measured["gelu"] = form


def _affine(w: np.ndarray | None, bias: np.ndarray | None, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    w = np.ones(shape) if w is None or w.shape != shape else w
    bias = np.zeros(shape) if bias is None or bias.shape != shape else bias
    return w, bias


def _fit_epsilon(centered: np.ndarray, y: np.ndarray, w: np.ndarray, bias: np.ndarray, fit: Fit) -> None:
    """Per group (row of ``centered`` and ``y``): ``centered = sqrt(var + eps) * (y - bias) / w``.

    ``w`` and ``bias`` broadcast to ``y``; elements whose weight is (near) zero say nothing of eps.
    """
    var = np.mean(centered * centered, axis=1)
    w, bias = np.broadcast_to(w, y.shape), np.broadcast_to(bias, y.shape)
    usable = np.abs(w) > 1e-6 * max(float(np.max(np.abs(w))), 1e-30)
    normalized = np.where(usable, (y - bias) / np.where(usable, w, 1), 0.0)
    weight = np.sum(normalized * normalized, axis=1)
    rows = weight > 0
    if not np.any(rows):
        return
    scale = np.sum(centered[rows] * normalized[rows], axis=1) / weight[rows]
    # a negative fit is no setting: the formula's best with eps >= 0 then says how far off it is
    eps = max(float(np.median(scale * scale - var[rows])), 0.0)
    if not math.isfinite(eps):
        return
    residual = relative(y, centered / np.sqrt(var[:, None] + eps) * w + bias)
    fit.residuals["epsilon"] = residual
    if residual <= VALID:
        fit.measured["epsilon"] = eps
    theirs = fit.against.get("epsilon")
    if isinstance(theirs, float):
        fit.residuals["epsilon_at_a"] = relative(y, centered / np.sqrt(var[:, None] + theirs) * w + bias)


def _batchnorm(trace: Trace, module: str, k: int, features: int, x: np.ndarray, y: np.ndarray, w, bias,
               fit: Fit) -> None:
    """x, y: [channels, batch, ...] (the first CHANNELS channels)."""
    channels = x.shape[0]
    per_channel, out = x.reshape(channels, -1), y.reshape(channels, -1)
    mean = per_channel.mean(axis=1)
    w, bias = _affine(w, bias, (features,))
    _fit_epsilon(per_channel - mean[:, None], out, w[:channels, None], bias[:channels, None], fit)
    if "epsilon" not in fit.measured:
        return  # not normalized by its batch statistics (eval mode, another layer): no momentum applies
    after = read(trace, f"step{k}.buffers.{module}.running_mean")
    if after is None:
        return
    before = read(trace, f"step{k - 1}.buffers.{module}.running_mean") if k > 0 else np.zeros_like(after)
    if before is None or after.shape != (features,) or before.shape != after.shape:
        return
    after, before = after[:channels], before[:channels]
    pull = mean - before
    if not np.any(pull) or np.array_equal(after, before):
        return  # unmoved statistics: frozen, or momentum 0; not a momentum to name
    momentum = float(np.dot(after - before, pull) / np.dot(pull, pull))
    # the running mean moves by momentum * pull: rounding is relative to that move, not to the mean
    residual = relative(after - before, momentum * pull)
    fit.residuals["momentum"] = residual
    if residual <= MOMENTUM_VALID:
        fit.measured["momentum"] = momentum
    theirs = fit.against.get("momentum")
    if isinstance(theirs, float):
        fit.residuals["momentum_at_a"] = relative(after - before, theirs * pull)


def _layernorm(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], w: np.ndarray | None,
               bias: np.ndarray | None, fit: Fit) -> None:
    """x, y: [rows, features] (the first ROWS rows)."""
    size = x.shape[1]
    w, bias = _affine(w, bias, shape)
    _fit_epsilon(x - x.mean(axis=1, keepdims=True), y, w.reshape(1, size), bias.reshape(1, size), fit)

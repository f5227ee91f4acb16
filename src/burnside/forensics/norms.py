"""Normalization and activation layers measured from one side's tensors: BatchNorm's statistics,
epsilon and momentum, LayerNorm's and GroupNorm's epsilon (and GroupNorm's groups), GELU's form.

- BatchNorm, per channel c of the input x and output y: ``y = (x - m_c) / sqrt(v_c + eps) * w_c + b_c``
  with either the batch statistics (training mode: batch mean m_c, biased variance v_c over the
  batch and spatial axes) or the running statistics (eval mode: the running mean and variance the
  side held for that step). Each is fitted: ``s_c = sqrt(v_c + eps)`` is the least-squares slope of
  ``x - m_c`` on ``(y - b_c) / w_c`` and ``eps_c = s_c^2 - v_c``; epsilon is the median over
  channels. `statistics` is the one that reproduces the output (``batch`` or ``running``). The
  momentum, in training mode, from the running mean: ``rm_after - rm_before = momentum * (m -
  rm_before)``, rm_before the previous step's buffer (PyTorch's and burn's initial running mean is 0).
- LayerNorm: the same over the weight's trailing dimensions, one group per row.
- GroupNorm: the same per sample and group of channels, for each number of groups that divides the
  channels; the one that reproduces the output is measured as `groups`.
- GELU: which of the exact erf form and the tanh approximation reproduces the output.

The layer's input may be read from another trace than its output (``inputs``): a burn port's trace
has no `layer_inputs`, and its layer is measured from what PyTorch recorded feeding it.
"""

from __future__ import annotations

import math

import numpy as np

from burnside.forensics.layer_fit import VALID, Fit, choose, params_step, read, relative
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
KINDS = (*BATCHNORM, "LayerNorm", "GroupNorm", "GELU")
#: GroupNorm group counts tried at most (the divisors of the channels, smallest first).
GROUP_COUNTS = 16
_erf = np.vectorize(math.erf, otypes=[np.float64])


def measure_norm_or_activation(trace: Trace, kind: str, module: str, k: int, source: str, fit: Fit,
                               inputs: Trace | None = None) -> None:
    """Measure one BatchNorm, LayerNorm, GroupNorm or GELU of ``trace`` at step ``k`` from its input
    ``source``, read from ``inputs`` (default: ``trace`` itself)."""
    inputs = trace if inputs is None else inputs
    output = f"step{k}.activations.{module}"
    if source not in inputs or output not in trace or inputs.info(source).shape != trace.info(output).shape:
        return  # a BatchNorm's momentum also needs the output: it tells training mode from eval mode
    shape = inputs.info(source).shape
    if kind == "GELU":
        first = lambda v: v.reshape(-1)[:SAMPLE]
        x, y = read(inputs, source, first), read(trace, output, first)
        if x is not None and y is not None:
            _gelu(x, y, fit.measured, fit.residuals)
        return
    owner = module.split("#", 1)[0]
    w = read(trace, f"step{params_step(trace, k)}.params_before.{owner}.weight")
    bias = read(trace, f"step{params_step(trace, k)}.params_before.{owner}.bias")
    if kind in BATCHNORM:
        if len(shape) < 2:
            return
        channels = lambda v: np.moveaxis(v, 1, 0)[:CHANNELS]
        x, y = read(inputs, source, channels), read(trace, output, channels)
        if x is not None and y is not None:
            _batchnorm(trace, module, k, shape[1], x, y, w, bias, fit)
        return
    if kind == "GroupNorm":
        if len(shape) < 2 or shape[0] == 0:
            return
        samples = lambda v: v[:max(1, ROWS // 8)]
        x, y = read(inputs, source, samples), read(trace, output, samples)
        if x is not None and y is not None:
            _groupnorm(x, y, w, bias, fit)
        return
    normalized = w.shape if w is not None else shape[-1:]
    if tuple(shape[len(shape) - len(normalized):]) != normalized:
        return
    size = math.prod(normalized)
    rows = lambda v: v.reshape(-1, size)[:ROWS]
    x, y = read(inputs, source, rows), read(trace, output, rows)
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


def _fit_epsilon(centered: np.ndarray, y: np.ndarray, w: np.ndarray, bias: np.ndarray, fit: Fit,
                 var: np.ndarray | None = None) -> None:
    """Per group (row of ``centered`` and ``y``): ``centered = sqrt(var + eps) * (y - bias) / w``.

    ``w`` and ``bias`` broadcast to ``y``; elements whose weight is (near) zero say nothing of eps.
    ``var``: the variance each row is normalised by (default: its own biased variance).
    """
    if var is None:
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
    w, bias = w[:channels, None], bias[:channels, None]
    fits = {"batch": Fit({}, {}, fit.against)}
    _fit_epsilon(per_channel - mean[:, None], out, w, bias, fits["batch"])
    running = _running_statistics(trace, module, k, features)
    if running is not None:
        fits["running"] = Fit({}, {}, fit.against)
        r_mean, r_var = running[0][:channels], running[1][:channels]
        _fit_epsilon(per_channel - r_mean[:, None], out, w, bias, fits["running"], var=r_var)
    for statistics, one in fits.items():
        fit.residuals[statistics] = one.residuals.get("epsilon", math.inf)
    if len(fits) == 2:
        statistics = choose({name: fit.residuals[name] for name in fits})
    else:
        statistics = "batch" if "epsilon" in fits["batch"].measured else None
    chosen = fits.get(statistics) if statistics is not None else None
    if chosen is None:
        return
    fit.measured["statistics"] = statistics
    fit.measured.update(chosen.measured)
    fit.residuals.update(chosen.residuals)
    if fit.against.get("statistics", statistics) != statistics:
        fit.residuals.pop("epsilon_at_a", None)  # an epsilon under other statistics than A's: not A's to try
    if statistics != "batch" or trace.kind == "forward":
        # not normalized by its batch statistics (eval mode, another layer): no momentum applies; a forward
        # trace holds the buffers before its first batch only, not a move to measure it by
        return
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


def _running_statistics(trace: Trace, module: str, k: int, features: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The running mean and variance a side in eval mode normalised step ``k`` with: a forward trace's
    `step0.buffers` (as loaded), a training trace's `step{k}.buffers` (eval mode leaves them as they
    were before the step)."""
    for step in (k, 0):
        mean = read(trace, f"step{step}.buffers.{module}.running_mean")
        var = read(trace, f"step{step}.buffers.{module}.running_var")
        if mean is not None and var is not None and mean.shape == var.shape == (features,):
            return mean, var
    return None


def _groupnorm(x: np.ndarray, y: np.ndarray, w: np.ndarray | None, bias: np.ndarray | None, fit: Fit) -> None:
    """x, y: [samples, channels, ...]: the number of groups, then the epsilon, that reproduce y."""
    samples, channels = x.shape[0], x.shape[1]
    spatial = math.prod(x.shape[2:])
    w, bias = _affine(w, bias, (channels,))
    best: tuple[float, int, Fit] | None = None
    for groups in [g for g in range(1, channels + 1) if channels % g == 0][:GROUP_COUNTS]:
        rows = lambda v: v.reshape(samples * groups, -1)
        per = lambda v: np.tile(np.repeat(v.reshape(groups, channels // groups), spatial, axis=1), (samples, 1))
        one = Fit({}, {}, fit.against)
        xs = rows(x)
        _fit_epsilon(xs - xs.mean(axis=1, keepdims=True), rows(y), per(w), per(bias), one)
        residual = one.residuals.get("epsilon", math.inf)
        if best is None or residual < best[0]:
            best = (residual, groups, one)
    if best is None or "epsilon" not in best[2].measured:
        return
    residual, groups, one = best
    fit.measured["groups"] = str(groups)
    if fit.against.get("groups", str(groups)) != str(groups):
        one.residuals.pop("epsilon_at_a", None)
    fit.measured.update(one.measured)
    fit.residuals.update(one.residuals)


def _layernorm(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], w: np.ndarray | None,
               bias: np.ndarray | None, fit: Fit) -> None:
    """x, y: [rows, features] (the first ROWS rows)."""
    size = x.shape[1]
    w, bias = _affine(w, bias, shape)
    _fit_epsilon(x - x.mean(axis=1, keepdims=True), y, w.reshape(1, size), bias.reshape(1, size), fit)

"""Normalization and activation layers measured from one side's tensors: BatchNorm's statistics,
epsilon and momentum, the epsilon of LayerNorm, GroupNorm (and its groups), RMSNorm and InstanceNorm
(and what InstanceNorm normalises by), whether a norm has a weight and bias, GELU's form, PReLU's slope.

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
- RMSNorm: ``y = x / sqrt(mean(x^2) + eps) * w`` over the weight's trailing dimensions, fitted as
  LayerNorm's without the mean.
- InstanceNorm, per sample and channel: GroupNorm with one channel per group, or, when the side holds
  running statistics (PyTorch's `track_running_stats=True` in eval mode), BatchNorm's running form:
  `normalised_by` is the one that reproduces the output (``each sample`` or ``running statistics``).
- A norm's `affine`: which of a weight and a bias the side's parameters hold for it (``weight and
  bias``, ``weight only``, ``none``: PyTorch's `elementwise_affine=False`, `affine=False`, `bias=False`).
- An epsilon no sharper than rounding allows is reported as the nearest usual value that fits as well
  (PyTorch's default for the layer first: 1e-5, RMSNorm's ``torch.finfo(float32).eps``).
- GELU: which of the exact erf form and the tanh approximation reproduces the output (or SiLU, ReLU or the
  quick GELU `x sigmoid(1.702 x)`, a port's other activation in its place). The same for every elementwise
  activation module of `ACTIVATIONS`: torch's (`SiLU`, `ReLU`, `Mish`, ...) and Hugging Face's `ACT2FN` classes
  (`GELUActivation` is the erf form, `NewGELUActivation`, `GELUTanh`, `FastGELUActivation` the tanh one,
  `QuickGELUActivation`, `SiLUActivation`, ...), measured as the one form of `FORMS` that reproduces the output.
- PReLU, per channel (axis 1; one for a 1-d input): ``y = x`` where ``x >= 0``, ``slope_c * x`` below;
  `slopes` says ``one`` (all channels alike) or ``per channel (C)``, `slope` the shared one's value.

The layer's input may be read from another trace than its output (``inputs``): a burn port's trace
has no `layer_inputs`, and its layer is measured from what PyTorch recorded feeding it.
"""

from __future__ import annotations

import math

import numpy as np

from burnside.compare.layers.layer_fit import ACTIVATIONS as FUNCTIONS, VALID, Fit, choose, params_step, read, relative
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
INSTANCENORM = ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d")
RMSNORM = "RMSNorm"
#: Elementwise activation modules, by class (torch's, and Hugging Face's `transformers.activations`), with the form
#: each computes (`FORMS`; "" where a setting says: torch's GELU, erf unless `approximate='tanh'`) and, for Hugging
#: Face's, the `hidden_act` name of its config that builds it.
ACTIVATIONS: dict[str, tuple[str, str]] = {
    "GELU": ("", ""), "GELUActivation": ("erf", "gelu"), "NewGELUActivation": ("tanh", "gelu_new"),
    "GELUTanh": ("tanh", "gelu_pytorch_tanh"), "PytorchGELUTanh": ("tanh", "gelu_pytorch_tanh"),
    "FastGELUActivation": ("tanh", "gelu_fast"), "AccurateGELUActivation": ("tanh", "gelu_accurate"),
    "QuickGELUActivation": ("quick", "quick_gelu"), "SiLU": ("silu", ""), "SiLUActivation": ("silu", "silu"),
    "Mish": ("mish", ""), "MishActivation": ("mish", "mish"), "ReLU": ("relu", ""), "Sigmoid": ("sigmoid", ""),
    "Tanh": ("tanh-function", ""),
}
#: The forms an activation is measured as, by the formula of `layer_fit.ACTIVATIONS` that computes each: GELU's two
#: forms, the activations a port writes in another's place, and none (the module's input as it is: the activation
#: left out).
FORMS = {"erf": "gelu", "tanh": "gelu_tanh", "silu": "silu", "relu": "relu", "quick": "quick_gelu",
         "sigmoid": "sigmoid", "tanh-function": "tanh", "mish": "mish", "identity": "identity"}
KINDS = (*BATCHNORM, "LayerNorm", "GroupNorm", RMSNORM, *INSTANCENORM, *ACTIVATIONS, "PReLU")
#: ``torch.finfo(torch.float32).eps``: `nn.RMSNorm(eps=None)`'s epsilon in a float32 model.
F32_EPS = float(np.finfo(np.float32).eps)
#: Usual epsilons a measurement is reported as when one fits as well as the least-squares value.
EPSILONS = (1e-3, 1e-4, 1e-5, 1e-6, F32_EPS, 1e-8, 1e-12)
#: Two channels' PReLU slopes are one slope within this (relative to the largest).
SLOPES_ALIKE = 1e-5
#: GroupNorm group counts tried at most (the divisors of the channels, smallest first).
GROUP_COUNTS = 16


def measure_norm_or_activation(trace: Trace, kind: str, module: str, k: int, source: str, fit: Fit,
                               inputs: Trace | None = None) -> None:
    """Measure one BatchNorm, LayerNorm, GroupNorm or GELU of ``trace`` at step ``k`` from its input
    ``source``, read from ``inputs`` (default: ``trace`` itself)."""
    inputs = trace if inputs is None else inputs
    output = f"step{k}.activations.{module}"
    if source not in inputs or output not in trace or inputs.info(source).shape != trace.info(output).shape:
        return  # a BatchNorm's momentum also needs the output: it tells training mode from eval mode
    shape = inputs.info(source).shape
    if kind in ACTIVATIONS:
        first = lambda v: v.reshape(-1)[:SAMPLE]
        x, y = read(inputs, source, first), read(trace, output, first)
        if x is not None and y is not None:
            _gelu(x, y, fit.measured, fit.residuals, activation_setting(kind))
        return
    owner = module.split("#", 1)[0]
    if kind == "PReLU":
        x, y = read(inputs, source, _per_channel), read(trace, output, _per_channel)
        if x is not None and y is not None and x.shape == y.shape:
            _prelu(x, y, fit)
        return
    w, bias = _weights(trace, k, owner)
    _norm(trace, kind, module, k, shape, inputs, source, output, w, bias, fit)
    if "epsilon" in fit.measured:
        fit.measured["affine"] = ("weight and bias" if w is not None and bias is not None else
                                  "weight only" if w is not None else "bias only" if bias is not None else "none")


def _weights(trace: Trace, k: int, owner: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """A norm's weight and bias as the side recorded them: PyTorch's `weight`/`bias`, or burn's
    `gamma`/`beta` where a port's trace kept burn's names (InstanceNorm before burnside mapped them)."""
    found = []
    for names in (("weight", "gamma"), ("bias", "beta")):
        values = None
        for name in names:
            values = read(trace, f"step{params_step(trace, k)}.params_before.{owner}.{name}")
            if values is not None:
                break
        found.append(values)
    return found[0], found[1]


def _per_channel(v: np.ndarray) -> np.ndarray:
    """[channels, elements] (axis 1 of a batched input; one channel for a 1-d one), SAMPLE elements at most."""
    if v.ndim < 2:
        return v.reshape(1, -1)[:, :SAMPLE]
    channels = v.shape[1]
    return np.moveaxis(v, 1, 0).reshape(channels, -1)[:, :max(1, SAMPLE // max(channels, 1))]


def _norm(trace: Trace, kind: str, module: str, k: int, shape, inputs: Trace, source: str, output: str,
          w, bias, fit: Fit) -> None:
    if kind in BATCHNORM:
        if len(shape) < 2:
            return
        channels = lambda v: np.moveaxis(v, 1, 0)[:CHANNELS]
        x, y = read(inputs, source, channels), read(trace, output, channels)
        if x is not None and y is not None:
            _batchnorm(trace, module, k, shape[1], x, y, w, bias, fit)
        return
    if kind == "GroupNorm" or kind in INSTANCENORM:
        if len(shape) < 2 or shape[0] == 0:
            return
        samples = lambda v: v[:max(1, ROWS // 8)]
        x, y = read(inputs, source, samples), read(trace, output, samples)
        if x is None or y is None:
            return
        if kind == "GroupNorm":
            _groupnorm(x, y, w, bias, fit)
        else:
            _instancenorm(trace, module, k, x, y, w, bias, fit)
        return
    normalized = w.shape if w is not None else shape[-1:]
    if tuple(shape[len(shape) - len(normalized):]) != normalized:
        return
    size = math.prod(normalized)
    rows = lambda v: v.reshape(-1, size)[:ROWS]
    x, y = read(inputs, source, rows), read(trace, output, rows)
    if x is not None and y is not None:
        _layernorm(x, y, normalized, w, bias, fit, rms=kind == RMSNORM)


def activation_setting(kind: str) -> str:
    """The setting an activation's form is measured as: `gelu` for a GELU's class (torch's and Hugging Face's GELUs,
    the quick GELU), `activation` for another's."""
    return "gelu" if "GELU" in kind else "activation"


def _gelu(x: np.ndarray, y: np.ndarray, measured: dict, residuals: dict, setting: str = "gelu") -> None:
    # besides GELU's two forms, the activations a port writes in its place: SiLU, ReLU, CLIP's quick GELU, ...
    forms = {form: FUNCTIONS[name](x) for form, name in FORMS.items()}
    residuals.update({form: relative(y, expected) for form, expected in forms.items()})
    # the forms agree where |x| is small or large: only an input that tells them apart says which
    form = choose(residuals)
    if form is not None:
        measured[setting] = form


def _affine(w: np.ndarray | None, bias: np.ndarray | None, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    w = np.ones(shape) if w is None or w.shape != shape else w
    bias = np.zeros(shape) if bias is None or bias.shape != shape else bias
    return w, bias


def _fit_epsilon(centered: np.ndarray, y: np.ndarray, w: np.ndarray, bias: np.ndarray, fit: Fit,
                 var: np.ndarray | None = None, default: float = 1e-5) -> None:
    """Per group (row of ``centered`` and ``y``): ``centered = sqrt(var + eps) * (y - bias) / w``.

    ``w`` and ``bias`` broadcast to ``y``; elements whose weight is (near) zero say nothing of eps.
    ``var``: the variance each row is normalised by (default: its own biased variance). The epsilon
    is reported as ``default`` (PyTorch's for the layer) or the nearest of `EPSILONS` when that
    reproduces the output as well as the least-squares value (within twice its residual).
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
    formula = lambda e: centered / np.sqrt(var[:, None] + e) * w + bias
    residual = relative(y, formula(eps))
    distance = lambda e: abs(math.log10(e) - math.log10(max(eps, 1e-30)))
    for usual in (default, *sorted(EPSILONS, key=distance)):
        if distance(usual) <= 1 or usual == default:
            at = relative(y, formula(usual))
            if at <= 2 * residual:
                eps, residual = usual, at
                break
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
               bias: np.ndarray | None, fit: Fit, rms: bool = False) -> None:
    """x, y: [rows, features] (the first ROWS rows); ``rms``: RMSNorm's formula (no mean, no bias)."""
    size = x.shape[1]
    w, bias = _affine(w, None if rms else bias, shape)
    centered = x if rms else x - x.mean(axis=1, keepdims=True)
    _fit_epsilon(centered, y, w.reshape(1, size), bias.reshape(1, size), fit,
                 default=F32_EPS if rms else 1e-5)


def _instancenorm(trace: Trace, module: str, k: int, x: np.ndarray, y: np.ndarray, w, bias, fit: Fit) -> None:
    """x, y: [samples, channels, ...]: each sample's channel normalised by its own statistics, or (a
    side holding running statistics) by those, whichever reproduces y; then its epsilon."""
    samples, channels = x.shape[0], x.shape[1]
    w, bias = _affine(w, bias, (channels,))
    rows = lambda v: v.reshape(samples * channels, -1)
    xs, ys = rows(x), rows(y)
    per = lambda v: np.tile(v, samples)[:, None]
    fits = {"each sample": Fit({}, {}, fit.against)}
    _fit_epsilon(xs - xs.mean(axis=1, keepdims=True), ys, per(w), per(bias), fits["each sample"])
    running = _running_statistics(trace, module, k, channels)
    if running is not None:
        fits["running statistics"] = Fit({}, {}, fit.against)
        _fit_epsilon(xs - per(running[0]), ys, per(w), per(bias), fits["running statistics"],
                     var=np.tile(running[1], samples))
        residuals = {name: one.residuals.get("epsilon", math.inf) for name, one in fits.items()}
        fit.residuals.update(residuals)
        by = choose(residuals)
    else:
        by = "each sample"
    chosen = fits.get(by) if by is not None else None
    if chosen is None or "epsilon" not in chosen.measured:
        return
    fit.measured["normalised_by"] = by
    if fit.against.get("normalised_by", by) != by:
        chosen.residuals.pop("epsilon_at_a", None)  # an epsilon under other statistics than A's
    fit.measured.update(chosen.measured)
    fit.residuals.update(chosen.residuals)


def _prelu(x: np.ndarray, y: np.ndarray, fit: Fit) -> None:
    """x, y: [channels, elements]: the slope of each channel's negative part, the positive part passed."""
    negative = x < 0
    weight = np.sum(np.where(negative, x * x, 0.0), axis=1)
    seen = weight > 0
    if not np.any(seen):
        return  # no negative input: no slope shows
    slopes = np.sum(np.where(negative, x * y, 0.0), axis=1)[seen] / weight[seen]
    x, y, negative = x[seen], y[seen], negative[seen]
    expected = lambda s: np.where(negative, np.asarray(s).reshape(-1, 1) * x, x)
    residual = relative(y, expected(slopes))
    fit.residuals["slope"] = residual
    if residual > VALID:
        return  # not a PReLU of this input
    shared = float(np.max(np.abs(slopes - slopes.mean()))) <= SLOPES_ALIKE * max(float(np.max(np.abs(slopes))), 1e-30)
    fit.measured["slopes"] = "one" if shared or slopes.size == 1 else f"per channel ({slopes.size})"
    if fit.measured["slopes"] == "one":
        fit.measured["slope"] = float(slopes.mean())
    theirs = fit.against.get("slope")
    if isinstance(theirs, float):
        fit.residuals["slope_at_a"] = relative(y, expected(theirs))

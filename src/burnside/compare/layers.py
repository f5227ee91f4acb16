"""Layer forensics: the settings a normalization or GELU layer ran with, measured from each side's tensors.

Only the layer at the first divergence is measured, at that one step. Its input is the
activation recorded just before it in A's execution order (metadata `activations`), which is
its input only when the model is sequential there; so each measurement is first validated on
side A: the layer's formula with A's measured setting must reproduce A's own output to near
rounding (`VALID`), otherwise nothing is measured (a residual connection feeds the layer).

- BatchNorm (training mode), per channel c of the input x (batch mean m_c, biased variance v_c
  over the batch and spatial axes) and output y: ``y = (x - m_c) / sqrt(v_c + eps) * w_c + b_c``,
  so ``s_c = sqrt(v_c + eps)`` is the least-squares slope of ``x - m_c`` on ``(y - b_c) / w_c``
  and ``eps_c = s_c^2 - v_c``; epsilon is the median over channels. The momentum from the
  running mean: ``rm_after - rm_before = momentum * (m - rm_before)``, rm_before the previous
  step's buffer (PyTorch's and burn's initial running mean is 0).
- LayerNorm: the same over the weight's trailing dimensions, one group per row.
- GELU: which of the exact erf form and the tanh approximation reproduces the output.
- LSTM and GRU (one layer, either direction or both): which axis of ``[a, b, features]`` is time,
  from which reading reproduces the output with the layer's own weights (PyTorch's packed
  ``weight_ih_l0`` ..., gates in PyTorch's order): ``seq-first`` (PyTorch's default) or
  ``batch-first`` (burn's ``Lstm``/``BiLstm`` default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from burnside.trace import Trace, parse_name

#: A layer formula reproduces a side's output when it is within this of it (max |diff| over max
#: |output|). Faithful f32 layers measured at most 3.7e-7 (the examples' BatchNorm, ln1 and GELU on
#: both frameworks); the residual sum the transformer's ln2 reads gives 1.66, the other GELU form
#: 1.4e-4.
VALID = 1e-5
#: The running mean's move is reproduced within this (relative to the move) by a measured momentum.
#: Both examples' sides measured at most 3.1e-7.
MOMENTUM_VALID = 1e-3
#: BatchNorm channels (each read whole: its batch statistics) and LayerNorm rows measured at most:
#: a setting shows in every one.
CHANNELS = 8
ROWS = 64
#: GELU elements read at most (the first ones, flat).
SAMPLE = 1 << 16

_FLOATS = ("F32", "F64", "F16", "BF16")
_erf = np.vectorize(math.erf, otypes=[np.float64])
_BATCHNORM = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")
_RECURRENT = ("LSTM", "GRU")
_KINDS = (*_BATCHNORM, "LayerNorm", "GELU", *_RECURRENT)
#: A recurrent layer is re-run only on inputs up to this many elements (the formula loops over time).
RECURRENT_ELEMENTS = 1 << 20


@dataclass
class LayerForensics:
    """One layer's settings as each side's own tensors show them, at one step."""

    module: str  # `bn`, `mlp.act`
    kind: str  # A's class of it: `BatchNorm2d`, `LayerNorm`, `GELU`
    step: int
    input: str  # the activation read as the layer's input
    #: side ("a", "b") -> setting -> value: `epsilon`, `momentum` (floats), `gelu` ("erf" or "tanh"),
    #: `layout` ("seq-first" or "batch-first")
    measured: dict[str, dict[str, float | str]] = field(default_factory=dict)
    #: side -> what -> relative residual of the formula: `epsilon`/`momentum` with the side's measured
    #: value, `erf`/`tanh` for each GELU form, `seq-first`/`batch-first` for each reading; on B also `epsilon_at_a`/`momentum_at_a`, B's own
    #: tensors with A's measured value
    residuals: dict[str, dict[str, float]] = field(default_factory=dict)

    def differing(self) -> list[tuple[str, float | str, float | str]]:
        """(setting, A's value, B's value) for each setting measured on both sides that differs: the
        values are apart, and A's value misses B's tensors by over 10 times B's own value (a
        difference within the fit's own resolution is none)."""
        a, b = self.measured.get("a", {}), self.measured.get("b", {})
        fits = self.residuals.get("b", {})
        return [(key, a[key], b[key]) for key in a
                if key in b and _differs(key, a[key], b[key])
                and (isinstance(a[key], str) or fits.get(f"{key}_at_a", math.inf) > 10 * fits.get(key, 0.0))]

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "kind": self.kind, "step": self.step, "input": self.input,
                "measured": self.measured, "residuals": self.residuals,
                "differing": [list(d) for d in self.differing()]}


def _differs(key: str, a: float | str, b: float | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a != b
    if key == "epsilon":
        # measured to ~1% of 1e-5 on the examples; settings that matter differ by factors
        return abs(a - b) > 0.25 * max(abs(a), abs(b))
    return abs(a - b) > 0.01 + 0.05 * max(abs(a), abs(b))  # momentum: measured to 1e-6


def _read(trace: Trace, name: str, part=None) -> np.ndarray | None:
    """A float tensor of ``trace`` in float64, or None; ``part(array)`` picks the slice to convert
    first, so a big activation is never widened whole."""
    if name not in trace or trace.info(name).dtype not in _FLOATS or trace.info(name).n == 0:
        return None
    values = trace.values(name)
    values = np.array(values if part is None else part(values), dtype=np.float64)
    trace.release(name)
    return values


def _relative(actual: np.ndarray, expected: np.ndarray) -> float:
    size = float(np.max(np.abs(actual))) if actual.size else 0.0
    err = float(np.max(np.abs(actual - expected))) if actual.size else math.inf
    return err / size if size > 0 else (0.0 if err == 0 else math.inf)


def _input_name(a: Trace, step: int, module: str) -> str | None:
    order = a.metadata.get("activations")
    if not isinstance(order, list) or module not in order:
        return None
    i = order.index(module)
    if i > 0:
        return f"step{step}.activations.{order[i - 1]}"
    # the first layer reads the model's input: the one float input (labels are integers)
    inputs = [n for n in a.names if n.startswith(f"step{step}.inputs.") and a.info(n).dtype in _FLOATS]
    return inputs[0] if len(inputs) == 1 else None


def measure_layer(a: Trace, b: Trace, first: str) -> LayerForensics | None:
    """Measure the layer at the first divergence ``first`` on both sides, or None.

    None when that row is not a BatchNorm's, LayerNorm's, GELU's, LSTM's or GRU's output (or a
    BatchNorm's running statistic), when its input is not recorded on A, or when A's own output is not
    reproduced from that input by the layer's formula with any setting.
    """
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or not isinstance(modules, dict):
        return None
    k = parsed.step
    if parsed.stage == "activations":
        module = parsed.rest
    elif parsed.stage == "buffers" and parsed.rest.rsplit(".", 1)[-1] in ("running_mean", "running_var"):
        module = parsed.rest.rsplit(".", 1)[0]
    else:
        return None
    kind = modules.get(module)
    if kind not in _KINDS:
        return None
    source = _input_name(a, k, module)
    if source is None:
        return None
    result = LayerForensics(module, kind, k, source)
    for side, trace in (("a", a), ("b", b)):
        measured: dict[str, float | str] = {}
        residuals: dict[str, float] = {}
        against = result.measured.get("a", {})
        with np.errstate(all="ignore"):  # a NaN or an overflow in a trace fails the fit, no more
            _measure(trace, kind, module, k, source, _Fit(measured, residuals, against))
        if side == "a" and not measured:
            return None  # A's own layer is not reproduced from this input: not a sequential layer
        result.measured[side], result.residuals[side] = measured, residuals
    return result


@dataclass
class _Fit:
    """One side's measurement: what it measured, its residuals, and A's values to try on it too."""

    measured: dict[str, float | str]
    residuals: dict[str, float]
    against: dict[str, float | str]


def _measure(trace: Trace, kind: str, module: str, k: int, source: str, fit: _Fit) -> None:
    output = f"step{k}.activations.{module}"
    if kind in _RECURRENT:
        _recurrent(trace, kind, module, k, source, fit)
        return
    if source not in trace or output not in trace or trace.info(source).shape != trace.info(output).shape:
        return  # a BatchNorm's momentum also needs the output: it tells training mode from eval mode
    shape = trace.info(source).shape
    if kind == "GELU":
        first = lambda v: v.reshape(-1)[:SAMPLE]
        x, y = _read(trace, source, first), _read(trace, output, first)
        if x is not None and y is not None:
            _gelu(x, y, fit.measured, fit.residuals)
        return
    owner = module.split("#", 1)[0]
    w = _read(trace, f"step{k}.params_before.{owner}.weight")
    bias = _read(trace, f"step{k}.params_before.{owner}.bias")
    if kind in _BATCHNORM:
        if len(shape) < 2:
            return
        channels = lambda v: np.moveaxis(v, 1, 0)[:CHANNELS]
        x, y = _read(trace, source, channels), _read(trace, output, channels)
        if x is not None and y is not None:
            _batchnorm(trace, module, k, shape[1], x, y, w, bias, fit)
        return
    normalized = w.shape if w is not None else shape[-1:]
    if tuple(shape[len(shape) - len(normalized):]) != normalized:
        return
    size = math.prod(normalized)
    rows = lambda v: v.reshape(-1, size)[:ROWS]
    x, y = _read(trace, source, rows), _read(trace, output, rows)
    if x is not None and y is not None:
        _layernorm(x, y, normalized, w, bias, fit)


def _gelu(x: np.ndarray, y: np.ndarray, measured: dict, residuals: dict) -> None:
    forms = {"erf": 0.5 * x * (1 + _erf(x / math.sqrt(2))),
             "tanh": 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))}
    residuals.update({form: _relative(y, expected) for form, expected in forms.items()})
    best = min(residuals, key=residuals.__getitem__)
    other = max(residuals, key=residuals.__getitem__)
    # the forms agree where |x| is small or large: only an input that tells them apart says which
    if residuals[best] <= VALID and residuals[other] > 10 * residuals[best]:
        measured["gelu"] = best


def _affine(w: np.ndarray | None, bias: np.ndarray | None, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    w = np.ones(shape) if w is None or w.shape != shape else w
    bias = np.zeros(shape) if bias is None or bias.shape != shape else bias
    return w, bias


def _fit_epsilon(centered: np.ndarray, y: np.ndarray, w: np.ndarray, bias: np.ndarray, fit: _Fit) -> None:
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
    residual = _relative(y, centered / np.sqrt(var[:, None] + eps) * w + bias)
    fit.residuals["epsilon"] = residual
    if residual <= VALID:
        fit.measured["epsilon"] = eps
    theirs = fit.against.get("epsilon")
    if isinstance(theirs, float):
        fit.residuals["epsilon_at_a"] = _relative(y, centered / np.sqrt(var[:, None] + theirs) * w + bias)


def _batchnorm(trace: Trace, module: str, k: int, features: int, x: np.ndarray, y: np.ndarray, w, bias,
               fit: _Fit) -> None:
    """x, y: [channels, batch, ...] (the first CHANNELS channels)."""
    channels = x.shape[0]
    per_channel, out = x.reshape(channels, -1), y.reshape(channels, -1)
    mean = per_channel.mean(axis=1)
    w, bias = _affine(w, bias, (features,))
    _fit_epsilon(per_channel - mean[:, None], out, w[:channels, None], bias[:channels, None], fit)
    if "epsilon" not in fit.measured:
        return  # not normalized by its batch statistics (eval mode, another layer): no momentum applies
    after = _read(trace, f"step{k}.buffers.{module}.running_mean")
    if after is None:
        return
    before = _read(trace, f"step{k - 1}.buffers.{module}.running_mean") if k > 0 else np.zeros_like(after)
    if before is None or after.shape != (features,) or before.shape != after.shape:
        return
    after, before = after[:channels], before[:channels]
    pull = mean - before
    if not np.any(pull) or np.array_equal(after, before):
        return  # unmoved statistics: frozen, or momentum 0; not a momentum to name
    momentum = float(np.dot(after - before, pull) / np.dot(pull, pull))
    # the running mean moves by momentum * pull: rounding is relative to that move, not to the mean
    residual = _relative(after - before, momentum * pull)
    fit.residuals["momentum"] = residual
    if residual <= MOMENTUM_VALID:
        fit.measured["momentum"] = momentum
    theirs = fit.against.get("momentum")
    if isinstance(theirs, float):
        fit.residuals["momentum_at_a"] = _relative(after - before, theirs * pull)


def _layernorm(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], w: np.ndarray | None,
               bias: np.ndarray | None, fit: _Fit) -> None:
    """x, y: [rows, features] (the first ROWS rows)."""
    size = x.shape[1]
    w, bias = _affine(w, bias, shape)
    _fit_epsilon(x - x.mean(axis=1, keepdims=True), y, w.reshape(1, size), bias.reshape(1, size), fit)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))


def _run_recurrent(kind: str, x: np.ndarray, weights: dict[str, np.ndarray], suffix: str) -> np.ndarray | None:
    """One direction of PyTorch's LSTM or GRU over ``x`` [time, batch, features], from zero state:
    the hidden state at every step, [time, batch, hidden]."""
    w_ih, w_hh = weights.get(f"weight_ih_l0{suffix}"), weights.get(f"weight_hh_l0{suffix}")
    if w_ih is None or w_hh is None or w_ih.ndim != 2 or w_hh.ndim != 2 or w_ih.shape[1] != x.shape[2]:
        return None
    hidden = w_hh.shape[1]
    gates = 4 if kind == "LSTM" else 3
    if w_ih.shape[0] != gates * hidden or w_hh.shape[0] != gates * hidden:
        return None
    b_ih = weights.get(f"bias_ih_l0{suffix}", np.zeros(gates * hidden))
    b_hh = weights.get(f"bias_hh_l0{suffix}", np.zeros(gates * hidden))
    h = np.zeros((x.shape[1], hidden))
    c = np.zeros_like(h)
    out = np.empty((x.shape[0], x.shape[1], hidden))
    for t in range(x.shape[0]):
        gi, gh = x[t] @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        if kind == "LSTM":
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        else:
            (ri, zi, ni), (rh, zh, nh) = np.split(gi, 3, axis=1), np.split(gh, 3, axis=1)
            r, z = _sigmoid(ri + rh), _sigmoid(zi + zh)
            h = (1 - z) * np.tanh(ni + r * nh) + z * h
        out[t] = h
    return out


def _recurrent(trace: Trace, kind: str, module: str, k: int, source: str, fit: _Fit) -> None:
    """Which axis the layer reads as time: the reading whose re-run reproduces the output."""
    output = f"step{k}.activations.{module}"
    if source not in trace or output not in trace:
        return
    x_shape, y_shape = trace.info(source).shape, trace.info(output).shape
    if len(x_shape) != 3 or len(y_shape) != 3 or x_shape[:2] != y_shape[:2] or math.prod(x_shape) > RECURRENT_ELEMENTS:
        return
    prefix = f"step{k}.params_before.{module}."
    names = [n[len(prefix):] for n in trace.names if n.startswith(prefix)]
    if any("_l0" not in n for n in names):
        return  # a stacked layer (`_l1`, ...): its input is not the first layer's, no single formula
    weights = {n: w for n in names if (w := _read(trace, prefix + n)) is not None}
    x, y = _read(trace, source), _read(trace, output)
    if x is None or y is None:
        return

    def run(seq: np.ndarray) -> np.ndarray | None:
        forward = _run_recurrent(kind, seq, weights, "")
        if forward is None or "weight_ih_l0_reverse" not in weights:
            return forward
        backward = _run_recurrent(kind, seq[::-1], weights, "_reverse")
        return None if backward is None else np.concatenate([forward, backward[::-1]], axis=2)

    forms = {"seq-first": run(x)}
    swapped = run(np.swapaxes(x, 0, 1))
    forms["batch-first"] = None if swapped is None else np.swapaxes(swapped, 0, 1)
    for form, expected in forms.items():
        if expected is not None and expected.shape == y.shape:
            fit.residuals[form] = _relative(y, expected)
    if len(fit.residuals) < 2:
        return
    best = min(fit.residuals, key=fit.residuals.__getitem__)
    other = max(fit.residuals, key=fit.residuals.__getitem__)
    if fit.residuals[best] <= VALID and fit.residuals[other] > 10 * fit.residuals[best]:
        fit.measured["layout"] = best

"""Recurrent layers re-run in numpy: which axis of ``[a, b, features]`` an LSTM or GRU (one layer,
either direction or both) reads as time, from which reading reproduces the output with the layer's
own weights (PyTorch's packed ``weight_ih_l0`` ..., gates in PyTorch's order): ``seq-first``
(PyTorch's default) or ``batch-first`` (burn's ``Lstm``/``BiLstm`` default)."""

from __future__ import annotations

import math

import numpy as np

from burnside.compare.layers.layer_fit import Fit, choose, params_step, read, relative
from burnside.trace import Trace

KINDS = ("LSTM", "GRU")
#: A recurrent layer is re-run only on inputs up to this many elements (the formula loops over time).
RECURRENT_ELEMENTS = 1 << 20


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


def measure_recurrent(trace: Trace, kind: str, module: str, k: int, source: str, fit: Fit,
                      inputs: Trace | None = None) -> None:
    """Which axis the layer reads as time: the reading whose re-run reproduces the output; the input
    ``source`` read from ``inputs`` (default: ``trace`` itself)."""
    inputs = trace if inputs is None else inputs
    output = f"step{k}.activations.{module}"
    if source not in inputs or output not in trace:
        return
    x_shape, y_shape = inputs.info(source).shape, trace.info(output).shape
    if len(x_shape) != 3 or len(y_shape) != 3 or x_shape[:2] != y_shape[:2] or math.prod(x_shape) > RECURRENT_ELEMENTS:
        return
    prefix = f"step{params_step(trace, k)}.params_before.{module}."
    names = [n[len(prefix):] for n in trace.names if n.startswith(prefix)]
    if any("_l0" not in n for n in names):
        return  # a stacked layer (`_l1`, ...): its input is not the first layer's, no single formula
    weights = {n: w for n in names if (w := read(trace, prefix + n)) is not None}
    x, y = read(inputs, source), read(trace, output)
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
            fit.residuals[form] = relative(y, expected)
    if len(fit.residuals) < 2:
        return
    layout = choose(fit.residuals)
    if layout is not None:
        fit.measured["layout"] = layout

"""Convolutions re-run in numpy: the stride, padding and dilation of a Conv1d or Conv2d, from the layer's
input, its own weight and bias, and its output.

Each spatial axis's output length ``(L + 2p - d(k - 1) - 1) // s + 1`` must be the recorded output's:
the settings (s, p, d) that give that shape are the candidates (so a side whose output shape differs
is measured from its shape first), and each is confirmed by value, re-running the convolution on the
first samples and output channels. The simplest candidate that reproduces the output (smallest
dilation, then stride, then padding) is the measurement; a kernel of 1 makes every dilation
compute the same, and the simplest, 1, is then reported on both sides. Zero padding only
(PyTorch's `padding_mode="zeros"`, burn's only mode), symmetric on each axis.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from burnside.compare.layers.layer_fit import VALID, Fit, params_step, read, relative
from burnside.trace import Trace

KINDS = ("Conv1d", "Conv2d")
#: Strides and dilations tried per axis (strides up to the kernel's size too: a patch embedding's stride is its
#: kernel, 16 in ViT-B/16).
MOST = 4
#: Samples and output channels re-run per candidate.
SAMPLES = 2
CHANNELS = 8
#: Candidate settings confirmed by value at most.
CANDIDATES = 64
#: Multiply-adds per candidate at most (the input's first samples against the first output channels).
WORK = 1 << 25


def _candidates(lengths: tuple[int, ...], kernel: tuple[int, ...], out: tuple[int, ...]) -> list[tuple]:
    """(stride, padding, dilation) tuples, one entry per axis, that give output lengths ``out``."""
    axes = []
    for length, k, o in zip(lengths, kernel, out):
        found = []
        for d in range(1, MOST + 1 if k > 1 else 2):
            for s in range(1, max(MOST, k) + 1):
                for p in range(0, d * (k - 1) + 1):
                    if (length + 2 * p - d * (k - 1) - 1) >= 0 and (length + 2 * p - d * (k - 1) - 1) // s + 1 == o:
                        found.append((s, p, d))
        axes.append(found)
    combos = [tuple(zip(*combo)) for combo in itertools.product(*axes)]
    # simplest first: dilation, then stride, then padding
    combos.sort(key=lambda c: (sum(c[2]), sum(c[0]), sum(c[1])))
    return combos[:CANDIDATES]


def _conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, groups: int, channels: list[int],
          stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...]) -> np.ndarray:
    """PyTorch's convolution of ``x`` [n, c_in, *spatial] for output ``channels``: [n, len(channels), *out]."""
    spatial = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    kernel = w.shape[2:]
    span = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    windows = np.lib.stride_tricks.sliding_window_view(x, span, axis=tuple(range(2, 2 + spatial)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride) + \
        tuple(slice(None, None, d) for d in dilation)
    windows = windows[index]  # [n, c_in, *out, *kernel]
    per_group = w.shape[1]
    per_out = w.shape[0] // groups
    letters = "hwd"[:spatial]
    kernel_letters = "uvz"[:spatial]
    result = []
    for o in channels:
        g = o // per_out
        part = windows[:, g * per_group:(g + 1) * per_group]
        y = np.einsum(f"nc{letters}{kernel_letters},c{kernel_letters}->n{letters}", part, w[o])
        result.append(y + (bias[o] if bias is not None else 0.0))
    return np.stack(result, axis=1)


def measure_conv(trace: Trace, kind: str, module: str, k: int, source: str, fit: Fit,
                 inputs: Trace | None = None) -> None:
    """Measure one convolution of ``trace`` at step ``k`` from its input ``source`` (read from ``inputs``)."""
    inputs = trace if inputs is None else inputs
    output = f"step{k}.activations.{module}"
    spatial = 1 if kind == "Conv1d" else 2
    if source not in inputs or output not in trace:
        return
    x_shape, y_shape = inputs.info(source).shape, trace.info(output).shape
    w = read(trace, f"step{params_step(trace, k)}.params_before.{module}.weight")
    bias = read(trace, f"step{params_step(trace, k)}.params_before.{module}.bias")
    if w is None or w.ndim != spatial + 2 or len(x_shape) != spatial + 2 or len(y_shape) != spatial + 2:
        return
    if x_shape[0] != y_shape[0] or y_shape[1] != w.shape[0] or x_shape[1] % w.shape[1] or x_shape[0] == 0:
        return
    groups = x_shape[1] // w.shape[1]
    if w.shape[0] % groups or (bias is not None and bias.shape != (w.shape[0],)):
        return
    channels = list(range(min(CHANNELS, w.shape[0])))
    samples = min(SAMPLES, x_shape[0])
    work = samples * len(channels) * w.shape[1] * math.prod(w.shape[2:]) * math.prod(y_shape[2:])
    if work > WORK:
        return
    x = read(inputs, source, lambda v: v[:samples])
    y = read(trace, output, lambda v: v[:samples, :len(channels)])
    if x is None or y is None:
        return
    tried: dict[tuple, float] = {}
    for stride, padding, dilation in _candidates(tuple(x_shape[2:]), tuple(w.shape[2:]), tuple(y_shape[2:])):
        expected = _conv(x, w, bias, groups, channels, stride, padding, dilation)
        tried[(stride, padding, dilation)] = residual = relative(y, expected)
        if residual <= VALID:
            for name, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
                fit.measured[name] = _setting(value)
            fit.residuals["conv"] = residual
            break
    else:
        if tried:
            fit.residuals["conv"] = min(tried.values())
    theirs = tuple(fit.against.get(name) for name in ("stride", "padding", "dilation"))
    if all(isinstance(t, str) for t in theirs) and "stride" in fit.measured:
        # B's output from A's settings: how far A's convolution is from what B computed
        settings = tuple(parse_setting(t) for t in theirs)
        if all(len(s) == spatial for s in settings):
            shape = tuple((n + 2 * p - d * (kk - 1) - 1) // s + 1 for n, kk, s, p, d in
                          zip(x_shape[2:], w.shape[2:], *settings))
            if shape == tuple(y_shape[2:]):
                expected = _conv(x, w, bias, groups, channels, *settings)
                fit.residuals["conv_at_a"] = relative(y, expected)
            else:
                fit.residuals["conv_at_a"] = math.inf  # A's settings do not even give B's shape


def _setting(value: tuple[int, ...]) -> str:
    """`2` for one axis, `(2, 1)` for two."""
    return str(value[0]) if len(value) == 1 else "(" + ", ".join(str(v) for v in value) + ")"


def parse_setting(text: str) -> tuple[int, ...]:
    """The tuple `_setting` wrote."""
    return tuple(int(v) for v in text.strip("()").split(",") if v.strip())

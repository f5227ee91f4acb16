"""Pooling layers re-run in numpy: which pooling (max or average) over which window, stride and padding
reproduces a MaxPool's or AvgPool's output from its input.

A port writes `AvgPool2d` where the model has `MaxPool2d` (or the reverse), or copies a window or stride from
another layer; the shapes may still fit. Each spatial axis's output length ``(L + 2p - k) // s + 1`` must be the
recorded output's: the (window, stride, padding) that give that shape, alike on every axis, are the candidates,
each confirmed by value for both pooling kinds on the first sample and `conv.CHANNELS` channels. Max pooling pads
with -inf (PyTorch's and burn's), average pooling with zeros counted in the mean (PyTorch's and burn's default
``count_include_pad=True``). The measurement, `pool`, is the kind, window, stride and padding that reproduce the
output: A's own kind first, the window equal to the stride first, then the smallest window and padding.
"""

from __future__ import annotations

import itertools

import numpy as np

from burnside.compare.layers.conv import CHANNELS
from burnside.compare.layers.layer_fit import VALID, Fit, read, relative
from burnside.trace import Trace

KINDS = ("MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d")
#: The largest window tried per axis.
WINDOW = 8


def _pool(x: np.ndarray, op: str, window: int, stride: int, padding: int) -> np.ndarray:
    """``x`` [n, c, *spatial] pooled alike on every spatial axis."""
    spatial = x.ndim - 2
    fill = -np.inf if op == "max" else 0.0
    x = np.pad(x, [(0, 0), (0, 0)] + [(padding, padding)] * spatial, constant_values=fill)
    axes = tuple(range(2, 2 + spatial))
    windows = np.lib.stride_tricks.sliding_window_view(x, (window,) * spatial, axis=axes)
    windows = windows[(slice(None), slice(None)) + (slice(None, None, stride),) * spatial]
    inner = tuple(range(2 + spatial, 2 + 2 * spatial))
    return windows.max(axis=inner) if op == "max" else windows.mean(axis=inner)


def _candidates(lengths: tuple[int, ...], out: tuple[int, ...]) -> list[tuple[int, int, int]]:
    found = []
    for window, stride in itertools.product(range(1, WINDOW + 1), range(1, WINDOW + 1)):
        for padding in range(window // 2 + 1):  # PyTorch allows at most half the window
            if all(n + 2 * padding - window >= 0 and (n + 2 * padding - window) // stride + 1 == o
                   for n, o in zip(lengths, out)):
                found.append((window, stride, padding))
    return sorted(found, key=lambda c: (c[0] != c[1], c[0], c[2], c[1]))


def shown(op: str, window: int, stride: int, padding: int, spatial: int) -> str:
    """`max, window 2x2, stride 2, padding 0`."""
    return f"{op}, window {'x'.join([str(window)] * spatial)}, stride {stride}, padding {padding}"


def measure_pool(trace: Trace, kind: str, module: str, k: int, source: str, fit: Fit,
                 inputs: Trace | None = None) -> None:
    """Measure one pooling layer of ``trace`` at step ``k`` from its input ``source`` (read from ``inputs``)."""
    inputs = trace if inputs is None else inputs
    output = f"step{k}.activations.{module}"
    spatial = 1 if kind.endswith("1d") else 2
    if source not in inputs or output not in trace:
        return
    x_shape, y_shape = inputs.info(source).shape, trace.info(output).shape
    if len(x_shape) != spatial + 2 or len(y_shape) != spatial + 2 or x_shape[:2] != y_shape[:2] or not x_shape[0]:
        return
    x = read(inputs, source, lambda v: v[:1, :CHANNELS])
    y = read(trace, output, lambda v: v[:1, :CHANNELS])
    if x is None or y is None:
        return
    own = "max" if kind.startswith("Max") else "avg"
    ops = (own, "avg" if own == "max" else "max")
    tried: dict[str, float] = {}
    for window, stride, padding in _candidates(tuple(x_shape[2:]), tuple(y_shape[2:])):
        for op in ops:
            setting = shown(op, window, stride, padding, spatial)
            tried[setting] = residual = relative(y, _pool(x, op, window, stride, padding))
            if residual <= VALID:
                fit.measured["pool"] = setting
                fit.residuals["pool"] = residual
                fit.residuals[setting] = residual
                _at_a(fit, x, y, spatial)
                return
    if tried:
        fit.residuals["pool"] = min(tried.values())


def _at_a(fit: Fit, x: np.ndarray, y: np.ndarray, spatial: int) -> None:
    """B's output pooled with A's measured setting: how far A's pooling is from what B computed."""
    theirs = fit.against.get("pool")
    if not isinstance(theirs, str) or theirs == fit.measured.get("pool"):
        return
    op, window, stride, padding = parse(theirs)
    try:
        fit.residuals[theirs] = relative(y, _pool(x, op, window, stride, padding))
    except ValueError:  # A's window does not fit B's input
        fit.residuals[theirs] = float("inf")


def parse(setting: str) -> tuple[str, int, int, int]:
    """The (kind, window, stride, padding) `shown` wrote."""
    op, window, stride, padding = (part.strip() for part in setting.split(","))
    return (op, int(window.split()[1].split("x")[0]), int(stride.split()[1]), int(padding.split()[1]))

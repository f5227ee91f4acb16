"""The SGD replay: each step of one parameter replayed in float64, and the rows its settings are fitted on.

- `after - before = -lr * (g + wd * before)` (step 0, or any step without momentum);
- momentum: `buf_k = momentum * buf_{k-1} + (1 - dampening) * g_k`, `after - before = -lr * buf_k`;
- Nesterov (`nesterov=True`, burn's `MomentumConfig::with_nesterov(true)`): the same buffer, and
  `after - before = -lr * (g_k + momentum * buf_k)`.

Whether the updates are Nesterov's is measured from the steps after the first (where the buffer is no longer
the gradient itself): `(after - before) / lr` fitted on (buf_k, g_k, before) has a gradient coefficient of
-1 under Nesterov (the buffer's is -momentum) and 0 without (the buffer's is -1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from burnside.forensics.replay import (
    REPLAY_TOLERANCE,
    Rows,
    StepRates,
    beyond_rounding,
    explains,
    finite,
    half_ulp,
    number,
    sampled,
)
from burnside.trace import Trace


@dataclass
class SgdFits:
    """The rows the SGD settings are fitted on, gathered over the first group's parameters and the steps."""

    #: step 0, or a step without momentum: (g, before) -> after - before
    plain_x: Rows = field(default_factory=Rows)
    plain_y: Rows = field(default_factory=Rows)
    #: the first momentum buffer: (g, before) -> buf_0
    buffer0_x: Rows = field(default_factory=Rows)
    buffer0_y: Rows = field(default_factory=Rows)
    #: later momentum buffers: (buf_{k-1}, g, before) -> buf_k
    momentum_x: Rows = field(default_factory=Rows)
    momentum_y: Rows = field(default_factory=Rows)
    #: the step direction -> after - before, under momentum
    lr_x: Rows = field(default_factory=Rows)
    lr_y: Rows = field(default_factory=Rows)
    #: steps after the first, under momentum: (buf_k, g, before) -> (after - before) / lr
    nesterov_x: Rows = field(default_factory=Rows)
    nesterov_y: Rows = field(default_factory=Rows)
    #: per step, (the declared step direction, before - after): the learning rate the step applied
    step_lr: StepRates = field(default_factory=StepRates)

    def settings(self) -> dict[str, float]:
        """The settings the rows show: lr, weight_decay, momentum, dampening, nesterov (1.0 or 0.0), each only
        where a fit explains them."""
        measured: dict[str, float] = {}
        x, y = finite(self.plain_x.all(), self.plain_y.all())
        if x is not None and np.any(x[:, 0]):
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if coef[0] != 0 and explains(x, y, coef):
                measured["lr"] = float(-coef[0])
                measured["weight_decay"] = float(coef[1] / coef[0])
        x, y = finite(self.buffer0_x.all(), self.buffer0_y.all())
        if x is not None and x.shape[0] >= 2 and np.any(x[:, 0]):
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if coef[0] != 0 and explains(x, y, coef):
                measured["weight_decay"] = float(coef[1] / coef[0])
        x, y = finite(self.momentum_x.all(), self.momentum_y.all())
        if x is not None and x.shape[0] >= 3:
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if explains(x, y, coef):
                measured["momentum"] = float(coef[0])
                measured["dampening"] = float(1 - coef[1])
                if coef[1] != 0 and "weight_decay" not in measured:
                    measured["weight_decay"] = float(coef[2] / coef[1])
        x, y = finite(self.lr_x.all(), self.lr_y.all())
        if x is not None and np.dot(x, x) > 0:
            lr = float(np.dot(x, y) / np.dot(x, x))
            if explains(x[:, None], y, np.array([lr])):
                measured["lr"] = -lr
        x, y = finite(self.nesterov_x.all(), self.nesterov_y.all())
        if x is not None and x.shape[0] >= 3:
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if coef[0] != 0 and explains(x, y, coef):
                # the gradient's weight beside the buffer's: 1 / momentum under Nesterov (at least 1), 0 without
                measured["nesterov"] = 1.0 if abs(coef[1]) > 0.5 * abs(coef[0]) else 0.0
        return measured


def replay_sgd(trace: Trace, config: dict, k: int, p: str, before: np.ndarray, after: np.ndarray, grad: np.ndarray,
               lr: float, wd: float, fits: SgdFits) -> tuple[str, float] | None:
    """Replay step ``k`` of parameter ``p``; (what the replay misses, its residual) or None when it reproduces."""
    momentum, dampening = number(config, "momentum", 0.0), number(config, "dampening", 0.0)
    d = grad + wd * before
    buf = sampled(trace, f"step{k}.optim.momentum_buffer.{p}")
    prev = sampled(trace, f"step{k - 1}.optim.momentum_buffer.{p}") if k > 0 else None
    if momentum and buf is not None:
        step_dir = d + momentum * buf if config.get("nesterov") else buf
        if prev is not None:
            # buf_k = momentum * buf_{k-1} + (1 - dampening) * (g + wd * p): the parameter's column keeps
            # weight decay from being read as dampening
            fits.momentum_x.add(np.stack([prev.ravel(), grad.ravel(), before.ravel()], axis=1))
            fits.momentum_y.add(buf.ravel())
            if lr:
                fits.nesterov_x.add(np.stack([buf.ravel(), grad.ravel(), before.ravel()], axis=1))
                fits.nesterov_y.add(((after - before) / lr).ravel())
        else:
            # the first buffer is the decayed gradient itself, in PyTorch and in burn: g + wd * p
            fits.buffer0_x.add(np.stack([grad.ravel(), before.ravel()], axis=1))
            fits.buffer0_y.add(buf.ravel())
        fits.lr_x.add(step_dir.ravel())
        fits.lr_y.add((after - before).ravel())
        expected_buf = d if prev is None else momentum * prev + (1 - dampening) * d
        # the buffer's own rounding, its terms', and the decayed gradient's (scaled into the buffer)
        buf_rounding = half_ulp(buf) + (0.0 if prev is None else half_ulp(momentum * prev)) \
            + half_ulp((1 - dampening) * d) + 2 * (half_ulp(d) + half_ulp(wd * before))
        residual = beyond_rounding(buf, expected_buf, expected_buf, buf_rounding)
        if residual > REPLAY_TOLERANCE:
            return f"optim.momentum_buffer.{p}", residual
    else:
        step_dir = d
        if k == 0 or not momentum:
            fits.plain_x.add(np.stack([grad.ravel(), before.ravel()], axis=1))
            fits.plain_y.add((after - before).ravel())
    fits.step_lr.add(k, step_dir, before - after)
    expected = before - lr * step_dir
    # float32 rounding of the parameter before and after, of the step (lr times its direction) and of the terms
    # the direction is made of (the gradient plus weight decay, a Nesterov look-ahead): an update only as large
    # as that (weight decay alone on a bias whose gradient is ~1e-9) is rounding, not another optimizer
    rounding = half_ulp(before) + half_ulp(after) + half_ulp(lr * step_dir) \
        + abs(lr) * (2 * half_ulp(step_dir) + half_ulp(d) + half_ulp(wd * before))
    residual = beyond_rounding(after, expected, after - before if np.any(after != before) else lr * step_dir,
                               rounding)
    return (f"params_after.{p}", residual) if residual > REPLAY_TOLERANCE else None

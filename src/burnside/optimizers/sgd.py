"""SGD (`torch.optim.SGD`; burn's `SgdConfig` with `MomentumConfig`): its settings on both sides, its replay (each
step of one parameter replayed in float64) and the rows its settings are fitted on.

- `after - before = -lr * (g + wd * before)` (step 0, or any step without momentum);
- momentum: `buf_k = momentum * buf_{k-1} + (1 - dampening) * g_k`, `after - before = -lr * buf_k`;
- Nesterov (`nesterov=True`, burn's `MomentumConfig::with_nesterov(true)`): the same buffer, and
  `after - before = -lr * (g_k + momentum * buf_k)`.

Whether the updates are Nesterov's is measured from the steps after the first (where the buffer is no longer
the gradient itself): `(after - before) / lr` fitted on (buf_k, g_k, before) has a gradient coefficient of
-1 under Nesterov (the buffer's is -momentum) and 0 without (the buffer's is -1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from burnside.optimizers.replay import (
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
from burnside.optimizers.spec import Optimizer, Step
from burnside.optimizers.values import rust_number, setting
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


def _replay(step: Step, fits: SgdFits) -> tuple[str, float] | None:
    return replay_sgd(step.trace, step.config, step.k, step.param, step.before, step.after, step.coef * step.grad,
                      step.lr, step.weight_decay, fits)


#: How far apart (relative) two rates, two clipping thresholds or a scale and 1 are to be told apart.
_APART = 1e-3


def _clipping(fits: SgdFits, measured: dict, lr_by_step: dict[int, float], steps: int, clip: float,
              norm: Callable[[int], float], step_rate: Callable[[int], float]) -> None:
    """Plain SGD's update is linear in the gradient: a global clipping shows as a rate per step, and is that."""
    if not lr_by_step:
        return
    clipped = clipping_from_rates(lr_by_step, step_rate, clip, norm)
    if clipped is not None:
        measured.pop("lr", None)
        measured["clip_grad_norm"] = clipped
        lr_by_step.clear()


def clipping_from_rates(rates: dict[int, float], step_rate: Callable[[int], float], clip: float,
                        norm: Callable[[int], float]) -> float | None:
    """The `clip_grad_norm` a plain SGD's per-step rates show where it is not the declared ``clip`` (infinity: no
    clipping), or None: they show the declared rates, or no one threshold explains them. A step clipped at c moves by
    ``lr * min(1, c / |g_k|)``: each step's rate over the declared one, times the declared clipping's factor, is the
    factor the step applied; the clipped steps' factors times their gradient norms must give one c, and the steps at
    their full rate have norms at most c, over two clipped steps at least. A rate changed by hand follows the norms only
    by chance."""
    if all(abs(rate - step_rate(k)) <= _APART * step_rate(k) for k, rate in rates.items()):
        return None  # the declared rates (and the declared clipping, which the replay applied)
    implied: dict[int, float] = {}
    full: list[int] = []
    declared_clipped = False
    for k, rate in rates.items():
        said = step_rate(k)
        if said <= 0:
            return None
        declared = min(1.0, clip / (norm(k) + 1e-6)) if clip > 0 else 1.0
        declared_clipped |= declared < 1 - _APART
        factor = rate / said * declared
        if factor > 1 + _APART:
            return None  # faster than the unclipped rate: no clipping gives it
        if factor < 1 - _APART:
            implied[k] = factor * (norm(k) + 1e-6)
        else:
            full.append(k)
    if not implied:
        return math.inf if declared_clipped else None
    if len(implied) < 2:
        return None  # one clipped step's factor is as well another lr: the rates say which only over two
    threshold = float(np.median(list(implied.values())))
    if any(abs(c - threshold) > _APART * threshold for c in implied.values()):
        return None
    if any(norm(k) > threshold * (1 + _APART) for k in full):
        return None
    return threshold


def _torch_settings(group: Mapping) -> dict:
    return {"name": "sgd", "lr": float(group["lr"]), "momentum": float(group["momentum"]),
            "dampening": float(group["dampening"]), "nesterov": bool(group["nesterov"]),
            "weight_decay": float(group["weight_decay"]), "weight_decay_kind": "l2"}


def _burn_code(config: dict) -> str:
    """`SgdConfig::new()` with every `MomentumConfig` setting spelled out (burn's dampening default, 0.1, is PyTorch's
    trap) and the weight decay, where declared."""
    parts = ["SgdConfig::new()"]
    momentum = setting(config, "momentum") or 0.0
    if momentum:
        parts.append(f".with_momentum(Some(MomentumConfig::new().with_momentum({rust_number(momentum)})"
                     f".with_dampening({rust_number(setting(config, 'dampening') or 0.0)})"
                     f".with_nesterov({rust_number(bool(setting(config, 'nesterov')))})))")
    decay = setting(config, "weight_decay") or 0.0
    if decay:
        parts.append(f".with_weight_decay(Some(WeightDecayConfig::new({rust_number(decay)})))")
    return "".join(parts)


def _d009_fix(key: str, declared: object, name: str) -> str | None:
    if key == "nesterov":
        return ("build the momentum as declared: "
                f"`OptimizerSpec::sgd(lr).with_momentum(m).with_nesterov({str(declared).lower()})` "
                f"and `spec.init()`; a burn optimizer built by hand needs "
                f"`MomentumConfig::new().with_momentum(m).with_dampening(0.0).with_nesterov({str(declared).lower()})`")
    return None


OPTIMIZER = Optimizer(
    name="sgd", torch_class="SGD", torch_settings=_torch_settings,
    new_fits=SgdFits, replay=_replay, clipping=_clipping, flags=("nesterov",),
    burn_config="MomentumConfig", burn_code=_burn_code,
    burn_new={"momentum": 0.9, "dampening": 0.1, "nesterov": False, "weight_decay": 0.0},
    burn_defaults_setter="with_dampening", burn_defaults=("sgd/burn-default", (("dampening", 0.1),)),  # MomentumConfig
    d005_fixes={"dampening": ("build SGD with momentum as PyTorch's: `OptimizerSpec::sgd(lr).with_momentum(m)` "
                              "(dampening 0); a burn optimizer built by hand needs "
                              "`MomentumConfig::with_dampening(0.0)` explicitly (burn's default is 0.1, PyTorch's 0)")},
    d009_fix=_d009_fix,
    a1_names=("sgd", "momentum"))


__all__ = ["OPTIMIZER", "SgdFits", "clipping_from_rates", "replay_sgd"]

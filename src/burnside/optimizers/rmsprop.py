"""RMSprop (`torch.optim.RMSprop`; burn's `RmsPropConfig`): its settings on both sides, and its replay: each step of
one parameter replayed in float64 from its recorded tensors, and the rows its settings are fitted on (the same update
in PyTorch and burn-optim 0.22.1, docs/compare.md):

- `d = g + wd * before`; `square_avg_k = alpha * square_avg_{k-1} + (1 - alpha) * d²` (0 before step 0);
- centered: `grad_avg_k = alpha * grad_avg_{k-1} + (1 - alpha) * d`, the variance `square_avg - grad_avg²`;
- `q = d / (sqrt(variance) + eps)` (epsilon outside the root);
- momentum: `buf_k = momentum * buf_{k-1} + q` (`buf_0 = q`), `after - before = -lr * buf_k`; else `-lr * q`.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from burnside.optimizers.spec import BurnVariant, Optimizer, Step
from burnside.trace import Trace


@dataclass
class RmsPropFits:
    """The rows RMSprop's settings are fitted on, gathered over parameters and steps."""

    #: (square_avg_{k-1}, d²) -> square_avg_k: alpha and 1 - alpha
    square_x: Rows = field(default_factory=Rows)
    square_y: Rows = field(default_factory=Rows)
    #: (buf_{k-1}, d / sqrt(variance)) -> buf_k: momentum (eps is negligible beside sqrt(variance) here)
    momentum_x: Rows = field(default_factory=Rows)
    momentum_y: Rows = field(default_factory=Rows)
    #: a step without momentum buffer: (sqrt(variance), -lr * d / (after - before)): each element's eps
    eps_root: Rows = field(default_factory=Rows)
    eps_ratio: Rows = field(default_factory=Rows)
    #: per step, (the declared step direction, before - after): the learning rate the step applied
    step_lr: StepRates = field(default_factory=StepRates)

    def settings(self) -> dict[str, float]:
        """The settings the rows show: alpha, momentum, eps (each only where a fit explains them)."""
        measured: dict[str, float] = {}
        x, y = finite(self.square_x.all(), self.square_y.all())
        if x is not None and x.shape[0] >= 3 and np.any(x[:, 0]):
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if explains(x, y, coef):
                measured["alpha"] = float(coef[0])
        x, y = finite(self.momentum_x.all(), self.momentum_y.all())
        if x is not None and x.shape[0] >= 3:
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if explains(x, y, coef):
                measured["momentum"] = float(coef[0])
        root, ratio = self.eps_root.all(), self.eps_ratio.all()
        if root is not None and ratio is not None:
            keep = np.isfinite(root) & np.isfinite(ratio)
            if np.any(keep):
                # the elements with the largest updates read eps most precisely: their median
                eps = ratio[keep] - root[keep]
                measured["eps"] = float(np.median(eps))
        return measured


def replay_rmsprop(trace: Trace, config: dict, k: int, p: str, before: np.ndarray, after: np.ndarray,
                   grad: np.ndarray, lr: float, wd: float, fits: RmsPropFits) -> tuple[str, float] | None:
    """Replay step ``k`` of parameter ``p`` with the declared RMSprop; (what the replay misses, its residual)
    or None when it reproduces the recorded state and update."""
    alpha, eps, momentum = number(config, "alpha", 0.99), number(config, "eps", 1e-8), number(config, "momentum", 0.0)
    d = grad + wd * before
    square = sampled(trace, f"step{k}.optim.square_avg.{p}")
    if square is None:
        return None
    prev_square = sampled(trace, f"step{k - 1}.optim.square_avg.{p}") if k > 0 else None
    prev_square = np.zeros_like(d) if prev_square is None else prev_square
    fits.square_x.add(np.stack([prev_square, d * d], axis=1))
    fits.square_y.add(square)
    expected_square = alpha * prev_square + (1 - alpha) * d * d
    rounding = half_ulp(square) + half_ulp(alpha * prev_square) + 3 * half_ulp((1 - alpha) * d * d)
    residual = beyond_rounding(square, expected_square, expected_square, rounding)
    if residual > REPLAY_TOLERANCE:
        return f"optim.square_avg.{p}", residual
    variance = square
    if config.get("centered"):
        grad_avg = sampled(trace, f"step{k}.optim.grad_avg.{p}")
        if grad_avg is None:
            return f"optim.grad_avg.{p}", float("inf")
        prev = sampled(trace, f"step{k - 1}.optim.grad_avg.{p}") if k > 0 else None
        expected = (0.0 if prev is None else alpha * prev) + (1 - alpha) * d
        residual = beyond_rounding(grad_avg, expected, expected, half_ulp(grad_avg) + 2 * half_ulp((1 - alpha) * d))
        if residual > REPLAY_TOLERANCE:
            return f"optim.grad_avg.{p}", residual
        variance = np.maximum(square - grad_avg * grad_avg, 0.0)
    root = np.sqrt(variance)
    q = d / (root + eps)
    buf = sampled(trace, f"step{k}.optim.momentum_buffer.{p}")
    prev_buf = sampled(trace, f"step{k - 1}.optim.momentum_buffer.{p}") if k > 0 and buf is not None else None
    if prev_buf is not None:
        # fitted whenever the side keeps a buffer, whatever it declares: a port declaring momentum 0 that
        # steps with burn's default 0.9 shows it here
        fits.momentum_x.add(np.stack([prev_buf, d / np.where(root > 0, root, np.inf)], axis=1))
        fits.momentum_y.add(buf)
    if momentum > 0 and buf is not None:
        expected_buf = q if prev_buf is None else momentum * prev_buf + q
        rounding = half_ulp(buf) + 4 * half_ulp(q) + (0 if prev_buf is None else half_ulp(momentum * prev_buf))
        residual = beyond_rounding(buf, expected_buf, expected_buf, rounding)
        if residual > REPLAY_TOLERANCE:
            return f"optim.momentum_buffer.{p}", residual
        step_dir = buf
    else:
        step_dir = q
        moved = after - before
        big = np.abs(moved) > 0.5 * np.max(np.abs(moved)) if np.any(moved) else np.zeros_like(moved, dtype=bool)
        if np.any(big) and buf is None:  # a recorded buffer the declaration lacks: the update is not q
            fits.eps_root.add(root[big])
            fits.eps_ratio.add(-lr * d[big] / moved[big])
    fits.step_lr.add(k, step_dir, before - after)
    expected = before - lr * step_dir
    rounding = half_ulp(before) + half_ulp(after) + half_ulp(lr * step_dir) + abs(lr) * 4 * half_ulp(step_dir)
    residual = beyond_rounding(after, expected, after - before if np.any(after != before) else lr * step_dir, rounding)
    return (f"params_after.{p}", residual) if residual > REPLAY_TOLERANCE else None


def _replay(step: Step, fits: RmsPropFits) -> tuple[str, float] | None:
    return replay_rmsprop(step.trace, step.config, step.k, step.param, step.before, step.after, step.coef * step.grad,
                          step.lr, step.weight_decay, fits)


def _torch_settings(group: Mapping) -> dict:
    return {"name": "rmsprop", "lr": float(group["lr"]), "alpha": float(group["alpha"]), "eps": float(group["eps"]),
            "weight_decay": float(group["weight_decay"]), "weight_decay_kind": "l2",
            "momentum": float(group["momentum"]), "centered": bool(group["centered"])}



def _burn_update(p, state: dict, group: Mapping) -> None:
    """One RMSprop update of ``p`` on float64 tensors with burn-optim 0.22.1's float32 settings and constant.

    burn's `RmsProp` computes PyTorch's update in the same order (L2 decay on the gradient, the squared
    average, the centered variance, epsilon added outside the root, the momentum buffer), but holds
    alpha, epsilon, momentum and the decay as f32 and forms `1 - alpha` in f32: 0.99f32 gives 0.00999999
    for PyTorch's 0.01 (double), a relative -9.5e-7 in `square_avg` and +4.8e-7 in the update. Only those
    scalars are rounded here (rmsprop.rs `SquareAvgState`, `CenteredState`, `RmsPropMomentum::transform`).
    The state is kept under PyTorch's slot names; there is no step counter (burn keeps none).
    """
    alpha, eps = np.float32(group["alpha"]), float(np.float32(group["eps"]))
    wd, momentum = float(np.float32(group["weight_decay"])), float(np.float32(group["momentum"]))
    rest = float(np.float32(1) - alpha)
    alpha = float(alpha)
    grad = p * wd + p.grad if wd else p.grad
    first = "square_avg" not in state
    # in place, each operation rounded as written out (`g^2 * rest + avg * alpha`, ...), as for Adam
    if first:
        state["square_avg"] = grad.square().mul_(rest)
    else:
        state["square_avg"].mul_(alpha).add_(grad.square().mul_(rest))
    avg = state["square_avg"]
    if group["centered"]:
        if first:
            state["grad_avg"] = grad * rest + 0  # + 0 as before: a -0.0 gradient gives +0.0
        else:
            state["grad_avg"].mul_(alpha).add_(grad * rest)
        avg = avg - state["grad_avg"].square()
    update = grad / avg.sqrt().add_(eps)
    if momentum > 0:
        if first:
            state["momentum_buffer"] = update
        else:
            update = state["momentum_buffer"].mul_(momentum).add_(update)
    p.sub_(update * group["lr"])


def _burn_settings(group: Mapping, kind: str) -> dict:
    return {k: group[k] for k in ("lr", "alpha", "eps", "weight_decay", "momentum", "centered")}


OPTIMIZER = Optimizer(
    name="rmsprop", torch_class="RMSprop", torch_settings=_torch_settings,
    # torch.optim.RMSprop's step counter (burn's `RmsProp` counts no steps)
    unused_slots=("step",),
    # burn forms its `1 - alpha` in f32
    burn_variant=BurnVariant("burn-rmsprop", "_BurnRmsProp", _burn_settings, _burn_update),
    compared=("alpha", "centered"), own_eps=True,
    new_fits=RmsPropFits, replay=_replay, flags=("centered",),
    # judged by 1 - alpha, as a beta (measured to ~1e-5 on A1)
    fitted={"alpha": ("alpha", None, 1e-4)},
    burn_config="RmsPropConfig",
    burn_new={"alpha": 0.99, "momentum": 0.9, "eps": 1e-5, "centered": False, "weight_decay": 0.0},
    burn_setters={"alpha": ".with_alpha({})", "momentum": ".with_momentum({})", "eps": ".with_epsilon({})",
                  "centered": ".with_centered({})",
                  "weight_decay": ".with_weight_decay(Some(WeightDecayConfig::new({})))"},
    burn_defaults_setter="with_momentum",
    burn_defaults=("rmsprop/burn-default-momentum", (("momentum", 0.9), ("eps", 1e-5))),
    d005_fixes={
        "alpha": ("give RMSprop PyTorch's smoothing constant: `OptimizerSpec::rmsprop(lr).with_alpha(alpha)` "
                  "(`RmsPropConfig::with_alpha`)"),
        "centered": ("`OptimizerSpec::rmsprop(lr).with_centered(..)` as PyTorch's `centered=` "
                     "(`RmsPropConfig::with_centered`)"),
        "momentum": ("build RMSprop with PyTorch's momentum: `OptimizerSpec::rmsprop(lr)` (momentum 0, eps 1e-8), "
                     "`.with_momentum(m)` for another; a burn optimizer built by hand needs "
                     "`RmsPropConfig::new().with_momentum(0.0)` explicitly (burn's default is 0.9)"),
        "eps": ("give RMSprop PyTorch's epsilon: `OptimizerSpec::rmsprop(lr)` has it (1e-8); by hand, "
                "`RmsPropConfig::new().with_epsilon(1e-8)` (burn's default is 1e-5)")},
    a1_names=("rmsprop",), a1_settings=("lr", "alpha", "eps", "weight_decay", "momentum", "centered"))


__all__ = ["OPTIMIZER", "RmsPropFits", "replay_rmsprop"]


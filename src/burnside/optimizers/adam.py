"""Adam (`torch.optim.Adam`; burn's `AdamConfig`): its settings on both sides, and the replay it shares with AdamW
(`burnside.optimizers.adamw`): each step of one parameter replayed in float64, the rows its settings are fitted on,
and the gradient scale each step actually applied.

`exp_avg_0 = (1 - beta_1) g`, `exp_avg_sq_0 = (1 - beta_2) g^2`, and at step 0
`|m_hat / delta| = sqrt(v_hat) / lr + eps / lr` (a line in sqrt(v_hat)): lr and eps.

The scale step k applied to its gradients is measured from both moments with the declared betas
(`exp_avg` moves by `(1 - beta_1) s g`, `exp_avg_sq` by `(1 - beta_2) s^2 g^2`): where the two agree
on an `s` other than the declared clipping's, the updates show other clipping.

Weight decay is measured both ways, whatever the trace declares: L2 (`torch.optim.Adam(weight_decay=)`,
burn's `AdamConfig::with_weight_decay`, both `g + wd * p` into the moments) from the first moment,
`(exp_avg - beta_1 exp_avg_prev) / (1 - beta_1)` fitted on (g, p); decoupled (`torch.optim.AdamW`, burn's
`AdamW`: `p (1 - lr wd)` before the step) from the update, `(after - before) / lr` fitted on
(p, m_hat / (sqrt(v_hat) + eps)). Each group's are its own (`measure_optimizer` keeps a fit per group).

AMSGrad (`amsgrad=True`; burn 0.22.1's `AdamConfig::with_amsgrad`, `AdamWConfig::with_amsgrad`) divides
by the running maximum of `exp_avg_sq` (slot `max_exp_avg_sq`): where that maximum is above the current
`exp_avg_sq` (a gradient smaller than the average), the two updates part, and the recorded one tells
which it is.
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
    betas,
    standard_errors,
    beyond_rounding,
    decoupled,
    explains,
    finite,
    half_ulp,
    number,
    sampled,
)
from burnside.optimizers.spec import BurnVariant, Optimizer, Step
from burnside.trace import Trace


@dataclass
class AdamFits:
    """The rows the Adam settings are fitted on, gathered over the first group's parameters and the steps."""

    #: step 0: (d, exp_avg) pairs, exp_avg = (1 - beta_1) d
    beta1: Rows = field(default_factory=Rows)
    #: step 0: (d^2, exp_avg_sq) pairs, exp_avg_sq = (1 - beta_2) d^2
    beta2: Rows = field(default_factory=Rows)
    #: step 0: |d| -> |d / delta|, a line whose slope is 1 / lr and intercept eps / lr
    eps_x: Rows = field(default_factory=Rows)
    eps_y: Rows = field(default_factory=Rows)
    #: step -> ((1 - beta_1) g, exp_avg - beta_1 exp_avg_prev) pairs: exp_avg's move per unit of scale
    scale_m: dict[int, Rows] = field(default_factory=dict)
    #: step -> ((1 - beta_2) g^2, exp_avg_sq - beta_2 exp_avg_sq_prev) pairs: exp_avg_sq's move per scale^2
    scale_v: dict[int, Rows] = field(default_factory=dict)
    #: (g, p) -> (exp_avg - beta_1 exp_avg_prev) / (1 - beta_1): L2 weight decay in the moments
    l2_x: Rows = field(default_factory=Rows)
    l2_y: Rows = field(default_factory=Rows)
    #: (p, m_hat / (sqrt(v_hat) + eps)) -> (after - before) / lr: decoupled weight decay in the update
    decoupled_x: Rows = field(default_factory=Rows)
    decoupled_y: Rows = field(default_factory=Rows)
    #: per step, (m_hat / (sqrt(v_hat) + eps), before * decay - after): the learning rate the step applied
    step_lr: StepRates = field(default_factory=StepRates)
    #: parameter -> the running maximum of its recorded exp_avg_sq (AMSGrad's, where no slot records it)
    running_max: dict[str, np.ndarray] = field(default_factory=dict)
    #: where the running maximum is above exp_avg_sq: the largest |after - replay| relative to the update,
    #: with the maximum and without it, and how far apart the two replays are
    amsgrad_err: float = 0.0
    plain_err: float = 0.0
    amsgrad_gap: float = 0.0

    def settings(self) -> dict[str, float]:
        """The settings the rows show: beta_1, beta_2, lr and eps, the weight decay of each kind
        (`weight_decay_l2`, `weight_decay_decoupled`) and `amsgrad` (1.0 or 0.0), each only where a fit explains
        them."""
        measured: dict[str, float] = {}
        for rows, out in ((self.beta1, "beta_1"), (self.beta2, "beta_2")):
            pairs = rows.all()
            if pairs is not None:
                pairs = pairs[np.all(np.isfinite(pairs), axis=1)]
            if pairs is not None and np.dot(pairs[:, 0], pairs[:, 0]) > 0:
                factor = float(np.dot(pairs[:, 0], pairs[:, 1]) / np.dot(pairs[:, 0], pairs[:, 0]))
                if explains(pairs[:, :1], pairs[:, 1], np.array([factor])):
                    measured[out] = 1 - factor
        x, y = finite(self.eps_x.all(), self.eps_y.all())
        if x is not None and x.size >= 2:
            slope, intercept = np.polyfit(x, y, 1)
            if slope > 0 and explains(np.stack([x, np.ones_like(x)], axis=1), y, np.array([slope, intercept])):
                measured["lr"] = float(1 / slope)
                measured["eps"] = float(intercept / slope)
        for rows_x, rows_y, key, decay, scale in ((self.l2_x, self.l2_y, "weight_decay_l2", 1, 0),
                                                  (self.decoupled_x, self.decoupled_y, "weight_decay_decoupled", 0, 1)):
            x, y = finite(rows_x.all(), rows_y.all())
            if x is None or x.shape[0] < 3:
                continue
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if coef[scale] != 0 and explains(x, y, coef):
                # a decay within a few standard errors of 0 is float32 rounding (burn's constants, a sum's order)
                # correlated with the parameter, not a decay: 0
                error = standard_errors(x, y, coef)[decay]
                measured[key] = float(coef[decay] / coef[scale]) if abs(coef[decay]) > _RESOLVED * error else 0.0
        if self.amsgrad_gap > _AMSGRAD_GAP and min(self.amsgrad_err, self.plain_err) < REPLAY_TOLERANCE:
            measured["amsgrad"] = 1.0 if self.amsgrad_err < self.plain_err else 0.0
        return measured

    def clipping(self, steps: int, clip: float, norm: Callable[[int], float]) -> float | None:
        """The `clip_grad_norm` the moments show where it is not the declared ``clip`` (infinity: no clipping),
        or None: the declared clipping (or none) is what they show, or they show no single scale.
        ``norm(k)`` is the joint norm of step k's recorded gradients."""
        for k in range(steps):
            scales = []
            for found, root in ((self.scale_m.get(k), False), (self.scale_v.get(k), True)):
                if not found:
                    break
                pairs = found.all()
                pairs = pairs[np.all(np.isfinite(pairs), axis=1)]
                x, y = pairs[:, 0], pairs[:, 1]
                xx = float(np.dot(x, x))
                if xx == 0:
                    break
                factor = float(np.dot(x, y) / xx)
                if factor <= 0 or not explains(x[:, None], y, np.array([factor])):
                    break
                scales.append(math.sqrt(factor) if root else factor)
            if len(scales) != 2 or abs(scales[0] - scales[1]) > 1e-3 * max(scales):
                continue  # no one scale explains both moments: the betas differ, or no gradient moved them
            scale = scales[0]
            # the step's gradient norm is a full pass over its gradients: read only when clipping is declared, or
            # when the scale is reported as the clipping it implies
            declared = min(1.0, clip / (norm(k) + 1e-6)) if clip > 0 else 1.0
            if abs(scale - declared) <= 1e-3 * declared:
                continue
            return math.inf if abs(scale - 1.0) <= 1e-3 else scale * norm(k)
        return None


def scale_pairs(trace: Trace, config: dict, name: str, k: int, p: str, grad: np.ndarray, fits: AdamFits) -> None:
    """Step ``k``'s (raw gradient, moment move) pairs of one parameter, for the scale the step applied."""
    if not decoupled(name, config) and number(config, "weight_decay", 0.0) != 0:
        return  # an L2 term inside the moments: the gradient's scale is not separable from it
    b1, b2 = betas(config)
    m, v = sampled(trace, f"step{k}.optim.exp_avg.{p}"), sampled(trace, f"step{k}.optim.exp_avg_sq.{p}")
    if m is None or v is None or m.shape != grad.shape or v.shape != grad.shape:
        return
    pm = sampled(trace, f"step{k - 1}.optim.exp_avg.{p}") if k > 0 else np.zeros_like(m)
    pv = sampled(trace, f"step{k - 1}.optim.exp_avg_sq.{p}") if k > 0 else np.zeros_like(v)
    if pm is None or pv is None or pm.shape != m.shape or pv.shape != v.shape:
        return
    fits.scale_m.setdefault(k, Rows()).add(np.stack([(1 - b1) * grad, m - b1 * pm], axis=1))
    fits.scale_v.setdefault(k, Rows()).add(np.stack([(1 - b2) * grad * grad, v - b2 * pv], axis=1))


def replay_adam(trace: Trace, config: dict, name: str, k: int, p: str, before: np.ndarray, after: np.ndarray,
                grad: np.ndarray, lr: float, wd: float, fits: AdamFits) -> tuple[str, float] | None:
    """Replay step ``k`` of parameter ``p``; (what the replay misses, its residual) or None when it reproduces."""
    b1, b2 = betas(config)
    eps = number(config, "eps", 1e-8)
    is_decoupled = decoupled(name, config)
    d = grad if is_decoupled else grad + wd * before
    m, v = sampled(trace, f"step{k}.optim.exp_avg.{p}"), sampled(trace, f"step{k}.optim.exp_avg_sq.{p}")
    pm = sampled(trace, f"step{k - 1}.optim.exp_avg.{p}") if k > 0 else None
    pv = sampled(trace, f"step{k - 1}.optim.exp_avg_sq.{p}") if k > 0 else None
    if m is None or v is None or m.shape != grad.shape or v.shape != grad.shape:
        return None
    # AMSGrad's running maximum: the recorded slot where the side keeps one, else the maximum of the recorded
    # exp_avg_sq so far (0 before the first step, as in PyTorch and burn)
    running = fits.running_max.get(p)
    running = v if running is None or running.shape != v.shape else np.maximum(running, v)
    fits.running_max[p] = running
    amsgrad = bool(config.get("amsgrad"))
    recorded_max = sampled(trace, f"step{k}.optim.max_exp_avg_sq.{p}")
    if recorded_max is not None and recorded_max.shape != v.shape:
        recorded_max = None
    if pm is not None and pm.shape == m.shape:
        fits.l2_x.add(np.stack([grad, before], axis=1))
        fits.l2_y.add((m - b1 * pm) / (1 - b1))
    elif k == 0:
        fits.l2_x.add(np.stack([grad, before], axis=1))
        fits.l2_y.add(m / (1 - b1))
    if k == 0:
        fits.beta1.add(np.stack([d.ravel(), m.ravel()], axis=1))
        fits.beta2.add(np.stack([(d * d).ravel(), v.ravel()], axis=1))
        # AdamW decays the parameter first, by the declared lr * weight decay: what is left is Adam's step
        delta = (after - before * (1 - lr * wd) if is_decoupled else after - before).ravel()
        # at step 0 the bias-corrected moments are d and d^2 whatever the betas
        keep = (delta != 0) & (d.ravel() != 0)
        fits.eps_x.add(np.abs(d.ravel()[keep]))
        fits.eps_y.add(np.abs(d.ravel()[keep] / delta[keep]))
    t = k + 1
    m_hat = m / (1 - b1**t)
    # the second moment the declared optimizer divides by: AMSGrad's maximum (recorded, or the running one)
    v_max = (recorded_max if recorded_max is not None else running) if amsgrad else v
    plain = m_hat / (np.sqrt(v / (1 - b2**t)) + eps)
    with_max = m_hat / (np.sqrt(running / (1 - b2**t)) + eps)
    direction = m_hat / (np.sqrt(v_max / (1 - b2**t)) + eps)
    step = lr * direction
    decay = 1 - lr * wd if is_decoupled else 1.0
    expected_after = before * decay - step
    # the step's rate scales AdamW's decoupled decay too (`p (1 - lr wd) - lr direction`): a rate other than the
    # declared one moves the decay with it, so the rate is fitted on both
    fits.step_lr.add(k, direction + wd * before if is_decoupled else direction, before - after)
    if lr:
        fits.decoupled_x.add(np.stack([before, direction], axis=1))
        fits.decoupled_y.add((after - before) / lr)
        _amsgrad_evidence(fits, before * decay, after, lr * plain, lr * with_max, running > v * (1 + 1e-6))
    expected_m = (1 - b1) * d if pm is None else b1 * pm + (1 - b1) * d
    expected_v = (1 - b2) * d * d if pv is None else b2 * pv + (1 - b2) * d * d
    decayed = half_ulp(d) + (0.0 if is_decoupled else half_ulp(wd * before))  # g + wd * p, rounded in float32
    rounding_m = half_ulp(m) + half_ulp(expected_m) + (1 - b1) * decayed
    rounding_v = half_ulp(v) + 2 * half_ulp(expected_v) + 2 * (1 - b2) * np.abs(d) * decayed
    for slot, actual, expected, rounding in (("exp_avg", m, expected_m, rounding_m),
                                             ("exp_avg_sq", v, expected_v, rounding_v)):
        residual = beyond_rounding(actual, expected, expected, rounding)
        if residual > REPLAY_TOLERANCE:
            return f"optim.{slot}.{p}", residual
    if amsgrad and recorded_max is not None:
        prev_max = sampled(trace, f"step{k - 1}.optim.max_exp_avg_sq.{p}") if k > 0 else None
        expected_max = v if prev_max is None or prev_max.shape != v.shape else np.maximum(prev_max, v)
        residual = beyond_rounding(recorded_max, expected_max, expected_max,
                                   half_ulp(recorded_max) + rounding_v)
        if residual > REPLAY_TOLERANCE:
            return f"optim.max_exp_avg_sq.{p}", residual
    # float32 rounding of the parameter before and after, of the decoupled decay, and of the step's own
    # arithmetic (bias corrections, square root, epsilon, division, lr: a few roundings of the step's size)
    rounding = half_ulp(before) + half_ulp(after) + (half_ulp(lr * wd * before) if is_decoupled else 0.0) \
        + 4 * half_ulp(step)
    residual = beyond_rounding(after, expected_after, after - before, rounding)
    return (f"params_after.{p}", residual) if residual > REPLAY_TOLERANCE else None


#: Standard errors a weight decay's coefficient must be from 0 to be one.
_RESOLVED = 10

#: How far apart (relative to the update) the replays with and without AMSGrad's maximum must be for the
#: recorded update to tell them apart: far beyond the replay's tolerance.
_AMSGRAD_GAP = 10 * REPLAY_TOLERANCE


def _amsgrad_evidence(fits: AdamFits, start: np.ndarray, after: np.ndarray, plain: np.ndarray, with_max: np.ndarray,
                      apart: np.ndarray) -> None:
    """Where AMSGrad's maximum is above exp_avg_sq (``apart``), how far the recorded update is from a replay with
    the maximum and from one without (both relative to the update), and how far apart the two are."""
    if not np.any(apart):
        return
    scale = float(np.max(np.abs(after - start))) or 1.0
    fits.amsgrad_gap = max(fits.amsgrad_gap, float(np.max(np.abs(plain[apart] - with_max[apart]))) / scale)
    fits.amsgrad_err = max(fits.amsgrad_err,
                           float(np.max(np.abs(after[apart] - (start[apart] - with_max[apart])))) / scale)
    fits.plain_err = max(fits.plain_err, float(np.max(np.abs(after[apart] - (start[apart] - plain[apart])))) / scale)


def replay(step: Step, fits: AdamFits) -> tuple[str, float] | None:
    """Adam's or AdamW's replay of one step, and the gradient scale it applied (`scale_pairs`)."""
    found = replay_adam(step.trace, step.config, step.name, step.k, step.param, step.before, step.after,
                        step.coef * step.grad, step.lr, step.weight_decay, fits)
    scale_pairs(step.trace, step.config, step.name, step.k, step.param, step.grad, fits)
    return found


def clipping(fits: AdamFits, measured: dict, lr_by_step: dict[int, float], steps: int, clip: float,
             norm: Callable[[int], float], step_rate: Callable[[int], float]) -> None:
    """The clipping the moments show (`AdamFits.clipping`): the scale explains the moments, and betas fitted to scaled
    gradients would only restate it."""
    clipped = fits.clipping(steps, clip, norm)
    if clipped is not None:
        measured.pop("beta_1", None)
        measured.pop("beta_2", None)
        measured["clip_grad_norm"] = clipped


def torch_settings(group: Mapping, kind: str = "Adam") -> dict:
    """The trace's settings of one group of a torch.optim Adam, or AdamW (``kind``)."""
    return {"name": kind.lower(), "lr": float(group["lr"]), "betas": [float(b) for b in group["betas"]],
            "eps": float(group["eps"]), "weight_decay": float(group["weight_decay"]),
            "weight_decay_kind": "decoupled" if kind == "AdamW" or group.get("decoupled_weight_decay") else "l2",
            "amsgrad": bool(group["amsgrad"])}


def d009_fix(key: str, declared: object, optimizer: str) -> str | None:
    """D009's fix of Adam's or AdamW's (``optimizer``) AMSGrad or weight decay (its value and kind) where the updates
    show another."""
    if key == "amsgrad":
        return (f"build {optimizer} with `amsgrad` as declared: `OptimizerSpec::{optimizer}(lr).with_amsgrad("
                f"{str(declared).lower()})` and `spec.init()` (by hand, `{'AdamW' if optimizer == 'adamw' else 'Adam'}"
                f"Config::new().with_amsgrad({str(declared).lower()})`)")
    if key == "weight_decay" and isinstance(declared, tuple):
        value, kind = declared
        if kind == "decoupled":
            return ("decay as `torch.optim.AdamW` does, decoupled: "
                    f"`OptimizerSpec::adamw(lr).with_weight_decay({value:g})` "
                    f"and `spec.init()` (by hand, `AdamWConfig::new().with_weight_decay({value:g})`: burn's default is "
                    "1e-4, PyTorch's 0.01)")
        return (f"decay as `torch.optim.Adam(weight_decay=)` does, L2 on the gradient: `OptimizerSpec::adam(lr)"
                f".with_weight_decay({value:g})` and `spec.init()` (by hand, `AdamConfig::new().with_weight_decay("
                f"Some(WeightDecayConfig::new({value:g})))`; burn's `AdamW` decouples it)" if value else
                "build the optimizer without weight decay, as declared: `spec.init()` from the spec the trace records")
    return None


def _powi_f32(base: np.float32, n: int) -> np.float32:
    """`f32::powi` as compiled (compiler-rt's `__powisf2`: square-and-multiply in f32)."""
    result = np.float32(1.0)
    while True:
        if n & 1:
            result = np.float32(result * base)
        n >>= 1
        if n == 0:
            return result
        base = np.float32(base * base)


def _burn_update(p, state: dict, group: Mapping) -> None:
    """One Adam or AdamW update of ``p`` on float64 tensors with burn-optim 0.22.1's float32 scalar constants.

    burn holds beta_1, beta_2, epsilon and weight decay as f32 and forms `1 - beta`,
    `1 - beta^t` (with `powi`) and the bias-correction factors in f32; PyTorch keeps them in
    double. Only those scalars are rounded here: the tensor arithmetic is float64, so a burn
    port of Adam is within its own rounding of this run, and its distance from the plain
    float64 reference is burn's constants, not the port (adam.rs `AdaptiveMomentum::transform`,
    adamw.rs `AdaptiveMomentumW::transform`).
    """
    import torch

    b1, b2 = (np.float32(b) for b in group["betas"])
    eps, wd, lr = np.float32(group["eps"]), np.float32(group["weight_decay"]), group["lr"]
    f1, f2 = float(np.float32(1) - b1), float(np.float32(1) - b2)
    grad = p.grad
    if not group["decoupled"] and wd:
        grad = p * float(wd) + grad
    # in place, each operation rounded as written out (`m * b1 + g * f1`, ...): a new state tensor
    # per parameter per step left glibc's heap growing by half the float64 model each step at GPT-2 size
    if state:
        state["exp_avg"].mul_(float(b1)).add_(grad * f1)
        state["exp_avg_sq"].mul_(float(b2)).add_(grad.square().mul_(f2))
        state["step"] += 1
    else:
        state.update(exp_avg=grad * f1, exp_avg_sq=grad.square().mul_(f2), step=1)
    if group["amsgrad"]:  # burn keeps the running maximum of moment_2 and divides by it
        previous = state.get("max_exp_avg_sq")
        if previous is None:
            state["max_exp_avg_sq"] = state["exp_avg_sq"].clone()
        else:
            torch.maximum(previous, state["exp_avg_sq"], out=previous)
    second = state["max_exp_avg_sq"] if group["amsgrad"] else state["exp_avg_sq"]
    t = state["step"]
    bc1 = np.float32(1) - _powi_f32(b1, t)
    bc2 = np.float32(1) - _powi_f32(b2, t)
    if group["decoupled"]:
        # (m / bc1) / (sqrt(v / bc2) + eps), then p * (1 - lr * wd) - update * lr
        update = (state["exp_avg"] / float(bc1)).div_((second / float(bc2)).sqrt_().add_(float(eps)))
        decay = lr * float(wd)
        if decay:
            p.mul_(1.0 - decay)
        p.sub_(update.mul_(lr))
    else:
        bc2_sqrt = np.sqrt(bc2)
        factor = float(np.float32(bc2_sqrt / bc1))
        update = (state["exp_avg"] * factor).div_(second.sqrt().add_(float(np.float32(eps * bc2_sqrt))))
        p.sub_(update.mul_(lr))


def _burn_settings(group: Mapping, kind: str) -> dict:
    return {"lr": group["lr"], "betas": tuple(group["betas"]), "eps": group["eps"],
            "weight_decay": group["weight_decay"],
            "decoupled": kind == "AdamW" or bool(group.get("decoupled_weight_decay")),
            "amsgrad": bool(group.get("amsgrad"))}


#: Adam's and AdamW's arithmetic in burn (float32 scalar constants), one variant for both: AdamW's groups say
#: `decoupled`.
BURN_VARIANT = BurnVariant("burn-adam", "_BurnAdam", _burn_settings, _burn_update, defaults={"amsgrad": False})


#: D005's fixes of Adam's and AdamW's own settings
D005_FIXES = {
    "betas": ("give PyTorch's betas: `OptimizerSpec::adam(lr).with_betas(beta_1, beta_2)` (`adamw` alike); a burn "
              "optimizer built by hand, `AdamConfig::with_beta_1(..).with_beta_2(..)` (burn's defaults are 0.9 and "
              "0.999, as PyTorch's)"),
    "amsgrad": ("give Adam PyTorch's `amsgrad=`: `OptimizerSpec::adam(lr).with_amsgrad(..)` (`adamw` alike); a burn "
                "optimizer built by hand, `AdamConfig::with_amsgrad(..)` or `AdamWConfig::with_amsgrad(..)` (burn's "
                "default is false)"),
}

#: burn's `AdamConfig::new()` (and `AdamWConfig::new()`, with its weight decay) apart from the weight decay
ADAM_NEW = {"beta_1": 0.9, "beta_2": 0.999, "eps": 1e-5, "weight_decay": 0.0, "amsgrad": False}

OPTIMIZER = Optimizer(
    name="adam", torch_class="Adam", torch_settings=torch_settings,
    burn_variant=BURN_VARIANT, new_fits=AdamFits, replay=replay, clipping=clipping, flags=("amsgrad",),
    burn_config="AdamConfig", burn_new=ADAM_NEW,
    burn_setters={"beta_1": ".with_beta_1({})", "beta_2": ".with_beta_2({})", "eps": ".with_epsilon({})",
                  "amsgrad": ".with_amsgrad({})",
                  "weight_decay": ".with_weight_decay(Some(WeightDecayConfig::new({})))"},
    burn_defaults_setter="with_epsilon", burn_defaults=("adam/burn-default", (("eps", 1e-5),)),
    d005_fixes=D005_FIXES, d009_fix=d009_fix,
    a1_names=("adam",))


__all__ = ["ADAM_NEW", "BURN_VARIANT", "D005_FIXES", "OPTIMIZER", "AdamFits", "clipping", "d009_fix", "replay",
           "replay_adam", "scale_pairs", "torch_settings"]

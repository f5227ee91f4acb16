"""Adafactor (`torch.optim.Adafactor`; burn's `AdafactorConfig`): its settings on both sides, and its replay: each step
of one parameter replayed in float64 from its recorded tensors (the same update in PyTorch and burn-optim 0.22.1 with
relative step and parameter scaling on, docs/compare.md):

- `w = step^beta2_decay`; a matrix (the last two dimensions) `row_var = (1 - w) row_var + w mean(g², -1)`,
  `col_var = (1 - w) col_var + w mean(g², -2)` (the first step the means whole), the estimate
  `row_var · col_var / max(mean(row_var, -2), eps1)`; a vector `variance = (1 - w) variance + w g²`;
- `u = g / sqrt(max(estimate, eps1²))`, divided by `max(1, RMS(u) / d)`;
- `after = before (1 - lr wd) - min(lr, 1/sqrt(step)) max(eps2, RMS(before)) u` (burn's `relative_step` off:
  `lr` for the `min`; `scale_parameter` off: 1 for the `max`, as declared).

The update needs the whole tensor (its RMS, the row and column means), not the sampled elements the other replays
read: a parameter of more than `WHOLE` elements is not replayed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from burnside.optimizers.replay import REPLAY_TOLERANCE, beyond_rounding, half_ulp, number
from burnside.optimizers.spec import Optimizer, Step
from burnside.trace import Trace

#: The largest parameter the replay reads whole (elements).
WHOLE = 1 << 22


class AdafactorFits:
    """No setting of Adafactor is fitted: its update is replayed, and a miss is named by the replay."""

    def settings(self) -> dict[str, float]:
        """Nothing measured."""
        return {}


def _whole(trace: Trace, name: str) -> np.ndarray | None:
    if name not in trace:
        return None
    values = np.array(trace.values(name), dtype=np.float64)
    trace.release(name)
    return values


def replay_adafactor(trace: Trace, config: dict, k: int, p: str, lr: float) -> tuple[str, float] | None:
    """Replay step ``k`` of parameter ``p`` with the declared Adafactor; (what the replay misses, its residual) or
    None when it reproduces the recorded state and update (or the parameter is too large to read whole)."""
    name = f"step{k}.grads.{p}"
    if name not in trace or math.prod(trace.info(name).shape) > WHOLE:
        return None
    before, after, grad = (_whole(trace, f"step{k}.{stage}.{p}")
                           for stage in ("params_before", "params_after", "grads"))
    if before is None or after is None or grad is None or before.shape != grad.shape:
        return None
    decay, d, wd = number(config, "beta2_decay", -0.8), number(config, "d", 1.0), number(config, "weight_decay", 0.0)
    eps1, eps2 = number(config, "eps1", float(np.finfo(np.float32).eps)), number(config, "eps2", 1e-3)
    step = _whole(trace, f"step{k}.optim.step.{p}")
    t = float(step) if step is not None and step.size == 1 else float(k + 1)
    w = t ** decay
    square = grad * grad
    if grad.ndim >= 2:
        found = {}
        for slot, axis in (("row_var", -1), ("col_var", -2)):
            recorded = _whole(trace, f"step{k}.optim.{slot}.{p}")
            if recorded is None:
                return None
            prev = _whole(trace, f"step{k - 1}.optim.{slot}.{p}") if k > 0 else None
            mean = square.mean(axis=axis, keepdims=True)
            expected = mean if prev is None else (1 - w) * prev + w * mean
            residual = beyond_rounding(recorded, expected, expected, 4 * half_ulp(expected) + half_ulp(recorded))
            if residual > REPLAY_TOLERANCE:
                return f"optim.{slot}.{p}", residual
            found[slot] = recorded
        row, col = found["row_var"], found["col_var"]
        estimate = row * col / np.maximum(row.mean(axis=-2, keepdims=True), eps1)
    else:
        recorded = _whole(trace, f"step{k}.optim.variance.{p}")
        if recorded is None:
            return None
        prev = _whole(trace, f"step{k - 1}.optim.variance.{p}") if k > 0 else None
        expected = square if prev is None else (1 - w) * prev + w * square
        residual = beyond_rounding(recorded, expected, expected, 4 * half_ulp(expected) + half_ulp(recorded))
        if residual > REPLAY_TOLERANCE:
            return f"optim.variance.{p}", residual
        estimate = recorded
    update = grad / np.sqrt(np.maximum(estimate, eps1 * eps1))
    update = update / max(1.0, math.sqrt(float(np.mean(update * update))) / d)
    # burn's switches, as declared (torch.optim.Adafactor always has both on)
    step_size = min(lr, 1 / math.sqrt(t)) if config.get("relative_step", True) else lr
    rms = max(eps2, math.sqrt(float(np.mean(before * before)))) if config.get("scale_parameter", True) else 1.0
    scale = rms * step_size
    expected = before * (1 - lr * wd) - scale * update
    moved = after - before
    rounding = half_ulp(before) + half_ulp(after) + 8 * half_ulp(scale * update)
    residual = beyond_rounding(after, expected, moved if np.any(moved) else scale * update, rounding)
    return (f"params_after.{p}", residual) if residual > REPLAY_TOLERANCE else None


def _replay(step: Step, fits: AdafactorFits) -> tuple[str, float] | None:
    return replay_adafactor(step.trace, step.config, step.k, step.param, step.lr)


def _torch_settings(group: Mapping) -> dict:
    import torch

    # eps1=None is the parameters' machine epsilon, read by torch.optim.Adafactor at each step: the value used
    eps1 = group["eps"][0]
    if eps1 is None:
        eps1 = float(torch.finfo(next(iter(group["params"])).dtype).eps) if group["params"] else None
    return {"name": "adafactor", "lr": float(group["lr"]), "beta2_decay": float(group["beta2_decay"]),
            "eps1": None if eps1 is None else float(eps1), "eps2": float(group["eps"][1]), "d": float(group["d"]),
            "weight_decay": float(group["weight_decay"]), "weight_decay_kind": "decoupled",
            # what torch.optim.Adafactor always does (burn's AdafactorConfig can switch either off)
            "relative_step": True, "scale_parameter": True, "maximize": bool(group["maximize"])}


OPTIMIZER = Optimizer(
    name="adafactor", torch_class="Adafactor", torch_settings=_torch_settings,
    compared=("beta2_decay", "eps1", "eps2", "d", "relative_step", "scale_parameter"),
    new_fits=AdafactorFits, replay=_replay, reads_whole=True,
    d005_fixes={"relative_step": ("build Adafactor as torch.optim.Adafactor computes it: "
                                  "`OptimizerSpec::adafactor(lr)`; "
                                  "by hand, `AdafactorConfig::new()` keeps `relative_step` and `scale_parameter` on "
                                  "(PyTorch has no absolute step)")},
    a1_names=("adafactor",), a1_settings=("lr", "beta2_decay", "d", "weight_decay"))


__all__ = ["OPTIMIZER", "WHOLE", "AdafactorFits", "replay_adafactor"]


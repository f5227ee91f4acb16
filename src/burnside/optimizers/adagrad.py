"""Adagrad (`torch.optim.Adagrad`; burn's `AdaGradConfig`): its settings on both sides, and its replay: each step of
one parameter replayed in float64 from its recorded tensors, and the rows its settings are fitted on (the same update
in PyTorch and burn-optim 0.22.1, docs/compare.md):

- `d = g + wd * before`; `sum_k = sum_{k-1} + d²` (`initial_accumulator_value` before step 0);
- `after - before = -lr / (1 + (step - 1) * lr_decay) * d / (sqrt(sum_k) + eps)` (epsilon outside the root).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from burnside.optimizers.replay import REPLAY_TOLERANCE, Rows, StepRates, beyond_rounding, half_ulp, number, sampled
from burnside.optimizers.spec import Optimizer, Step
from burnside.trace import Trace


@dataclass
class AdagradFits:
    """The rows Adagrad's settings are fitted on, gathered over parameters and steps."""

    #: the largest updates of each step: (step, sqrt(sum), -d / (after - before)) per element
    steps: Rows = field(default_factory=Rows)
    roots: Rows = field(default_factory=Rows)
    ratios: Rows = field(default_factory=Rows)
    #: per step, (the declared step direction with its decay, before - after): the learning rate the step applied,
    #: in the declared lr's terms (before its decay)
    step_lr: StepRates = field(default_factory=StepRates)

    def settings(self, lr: float) -> dict[str, float]:
        """The settings the rows show for learning rate ``lr``: eps (from step 1's updates) and lr_decay (from the
        later steps' rates), each where the rows have them."""
        steps, roots, ratios = self.steps.all(), self.roots.all(), self.ratios.all()
        if steps is None or roots is None or ratios is None:
            return {}
        measured: dict[str, float] = {}
        # ratio = (sqrt(sum) + eps) * (1 + (step - 1) * lr_decay) / lr
        first = steps == 1
        if np.any(first):
            measured["eps"] = float(np.median(lr * ratios[first] - roots[first]))
        later = steps > 1
        if np.any(later):
            eps = measured.get("eps", 0.0)
            decay = (lr * ratios[later] / (roots[later] + eps) - 1) / (steps[later] - 1)
            measured["lr_decay"] = float(np.median(decay))
        return measured


def replay_adagrad(trace: Trace, config: dict, k: int, p: str, before: np.ndarray, after: np.ndarray,
                   grad: np.ndarray, lr: float, wd: float, fits: AdagradFits) -> tuple[str, float] | None:
    """Replay step ``k`` of parameter ``p`` with the declared Adagrad; (what the replay misses, its residual)
    or None when it reproduces the recorded state and update."""
    eps, lr_decay = number(config, "eps", 1e-10), number(config, "lr_decay", 0.0)
    d = grad + wd * before
    total, step = sampled(trace, f"step{k}.optim.sum.{p}"), sampled(trace, f"step{k}.optim.step.{p}")
    if total is None or step is None:
        return None
    prev = sampled(trace, f"step{k - 1}.optim.sum.{p}") if k > 0 else None
    prev = np.full_like(d, number(config, "initial_accumulator_value", 0.0)) if prev is None else prev
    expected_sum = prev + d * d
    residual = beyond_rounding(total, expected_sum, expected_sum, half_ulp(total) + 2 * half_ulp(d * d))
    if residual > REPLAY_TOLERANCE:
        return f"optim.sum.{p}", residual
    t = float(step[0])
    root = np.sqrt(total)
    clr = lr / (1 + (t - 1) * lr_decay)
    step_dir = d / (root + eps)
    moved = after - before
    big = np.abs(moved) > 0.5 * np.max(np.abs(moved)) if np.any(moved) else np.zeros_like(moved, dtype=bool)
    if np.any(big):
        fits.steps.add(np.full(int(np.count_nonzero(big)), t))
        fits.roots.add(root[big])
        fits.ratios.add(-d[big] / moved[big])
    if lr:
        fits.step_lr.add(k, step_dir * (clr / lr), -moved)
    expected = before - clr * step_dir
    rounding = half_ulp(before) + half_ulp(after) + half_ulp(clr * step_dir) + abs(clr) * 4 * half_ulp(step_dir)
    residual = beyond_rounding(after, expected, moved if np.any(moved) else clr * step_dir, rounding)
    return (f"params_after.{p}", residual) if residual > REPLAY_TOLERANCE else None


def _replay(step: Step, fits: AdagradFits) -> tuple[str, float] | None:
    return replay_adagrad(step.trace, step.config, step.k, step.param, step.before, step.after, step.coef * step.grad,
                          step.lr, step.weight_decay, fits)


def _measured(fits: AdagradFits, lr: float) -> dict[str, float]:
    return fits.settings(lr)


def _torch_settings(group: Mapping) -> dict:
    return {"name": "adagrad", "lr": float(group["lr"]), "lr_decay": float(group["lr_decay"]),
            "weight_decay": float(group["weight_decay"]), "weight_decay_kind": "l2",
            "initial_accumulator_value": float(group["initial_accumulator_value"]), "eps": float(group["eps"])}


def _fresh_state(state: Mapping, defaults: Mapping) -> bool:
    """torch.optim.Adagrad's constructor makes `step` 0 and `sum` at its `initial_accumulator_value`."""
    return float(state.get("step", 1)) == 0.0 and bool((state["sum"] == defaults["initial_accumulator_value"]).all())


OPTIMIZER = Optimizer(
    name="adagrad", torch_class="Adagrad", torch_settings=_torch_settings,
    # torch.optim.Adagrad starts each sum at its constructor's initial_accumulator_value, whatever a group says
    constructor_settings=("initial_accumulator_value",), fresh_state=_fresh_state,
    compared=("lr_decay", "initial_accumulator_value"), own_eps=True,
    new_fits=AdagradFits, replay=_replay, measured=_measured,
    fitted={"lr_decay": ("lr_decay", None, 1e-5)},  # measured to ~1e-6 on A1
    burn_config="AdaGradConfig", burn_new={"lr_decay": 0.0, "eps": 1e-5, "weight_decay": 0.0},
    burn_setters={"lr_decay": ".with_lr_decay({})", "eps": ".with_epsilon({})",
                  "weight_decay": ".with_weight_decay(Some(WeightDecayConfig::new({})))"},
    burn_defaults_setter="with_epsilon", burn_defaults=("adagrad/burn-default", (("eps", 1e-5),)),
    d005_fixes={"lr_decay": ("`OptimizerSpec::adagrad(lr).with_lr_decay(..)` as PyTorch's `lr_decay=` "
                             "(`AdaGradConfig::with_lr_decay`)"),
                "initial_accumulator_value": ("burn's `AdaGrad` starts its sum at 0 and has no setting for another "
                                              "start: train the PyTorch side with initial_accumulator_value=0"),
                "eps": ("give Adagrad PyTorch's epsilon: `OptimizerSpec::adagrad(lr)` has it (1e-10); by hand, "
                        "`AdaGradConfig::new().with_epsilon(1e-10)` (burn's default is 1e-5)")},
    a1_names=("adagrad",), a1_settings=("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"))


__all__ = ["OPTIMIZER", "AdagradFits", "replay_adagrad"]


"""AdamW (`torch.optim.AdamW`; burn's `AdamWConfig`): Adam with the weight decay decoupled, applied to the parameter
before the step. Its replay and fits are Adam's (`burnside.optimizers.adam`), which read the decay's kind from the
name; burn's `AdamWConfig::new()` decays by 1e-4 where PyTorch's AdamW decays by 0.01."""

from __future__ import annotations

from collections.abc import Mapping

from burnside.optimizers.adam import (
    ADAM_NEW,
    BURN_VARIANT,
    D005_FIXES,
    AdamFits,
    clipping,
    d009_fix,
    replay,
    torch_settings,
)
from burnside.optimizers.spec import Optimizer


def _torch_settings(group: Mapping) -> dict:
    return torch_settings(group, "AdamW")


OPTIMIZER = Optimizer(
    name="adamw", torch_class="AdamW", torch_settings=_torch_settings,
    burn_variant=BURN_VARIANT, new_fits=AdamFits, replay=replay, clipping=clipping, flags=("amsgrad",),
    burn_config="AdamWConfig", burn_new={**ADAM_NEW, "weight_decay": 1e-4},
    burn_setters={"beta_1": ".with_beta_1({})", "beta_2": ".with_beta_2({})", "eps": ".with_epsilon({})",
                  "weight_decay": ".with_weight_decay({})", "amsgrad": ".with_amsgrad({})"},
    burn_defaults_setter="with_weight_decay",
    burn_defaults=("adamw/burn-default", (("eps", 1e-5), ("weight_decay", 1e-4))),
    d005_fixes=D005_FIXES, d009_fix=d009_fix,
    a1_names=("adamw",))


__all__ = ["OPTIMIZER"]

"""The rule registry: one module per rule, keyed by its stable ID.

Each rule module defines `ID`, `NAME`, `SEVERITY`, `TITLE`, a docstring in
four sections (What it does / Why is this bad? / Example / Use instead),
`TOKENS` (what a file must hold for the rule to find anything: the engine's
prefilter is built from them, `burnside.lint.prefilter`) and
`check(unit) -> Iterable[Hit]`.
"""

from __future__ import annotations

from types import ModuleType

from burnside.lint.rules import (
    bs001_step_result_discarded,
    bs002_grads_from_other_module,
    bs003_optimizer_reused_after_discard,
    bs004_adam_default_epsilon,
    bs005_sgd_default_dampening,
    bs006_adamw_default_weight_decay,
    bs007_per_tensor_clip_norm,
    bs008_rmsprop_defaults,
    bs009_adagrad_default_epsilon,
    bs010_muon_default_weight_decay,
)

RULES: dict[str, ModuleType] = {
    module.ID: module
    for module in (
        bs001_step_result_discarded,
        bs002_grads_from_other_module,
        bs003_optimizer_reused_after_discard,
        bs004_adam_default_epsilon,
        bs005_sgd_default_dampening,
        bs006_adamw_default_weight_decay,
        bs007_per_tensor_clip_norm,
        bs008_rmsprop_defaults,
        bs009_adagrad_default_epsilon,
        bs010_muon_default_weight_decay,
    )
}

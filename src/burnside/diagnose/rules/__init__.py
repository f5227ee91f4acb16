"""The diagnosis rules, in the order they are reported: causes before the symptoms they explain.

Each rule declares where it stands with ``PRECEDENCE`` (lower first); `ordered` sorts by it.
"""

from types import ModuleType

from burnside.diagnose.rules import (
    d001_step_result_discarded,
    d002_grads_from_other_module,
    d003_optimizer_state_without_model,
    d004_adam_epsilon,
    d005_optimizer_config,
    d006_inputs_not_identical,
    d007_layout_transposed,
    d008_parameter_unused,
    d009_update_differs,
    d010_forward_differs,
    d011_layer_configured_differently,
    d012_trains_frozen_parameters,
    d013_dropout_mask,
    d014_weights_not_loaded,
    d015_batchnorm_mode,
    d016_run_diverged,
    d017_loss_differs,
    d018_gradient_accumulation,
    d019_backward_differs,
    d020_parted_in_statistics,
    d021_optimizer_state_restarts,
)


def ordered(rules: tuple[ModuleType, ...]) -> tuple[ModuleType, ...]:
    """``rules`` in report order: by each rule's ``PRECEDENCE``, which every rule declares once and no two share."""
    return tuple(sorted(rules, key=lambda rule: rule.PRECEDENCE))


RULES = ordered((
    d001_step_result_discarded,
    d002_grads_from_other_module,
    d003_optimizer_state_without_model,
    d004_adam_epsilon,
    d005_optimizer_config,
    d006_inputs_not_identical,
    d007_layout_transposed,
    d008_parameter_unused,
    d009_update_differs,
    d010_forward_differs,
    d011_layer_configured_differently,
    d012_trains_frozen_parameters,
    d013_dropout_mask,
    d014_weights_not_loaded,
    d015_batchnorm_mode,
    d016_run_diverged,
    d017_loss_differs,
    d018_gradient_accumulation,
    d019_backward_differs,
    d020_parted_in_statistics,
    d021_optimizer_state_restarts,
))

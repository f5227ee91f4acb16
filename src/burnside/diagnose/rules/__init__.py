"""The diagnosis rules, in the order they are reported (causes before symptoms)."""

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
    d017_loss_differs,
)

RULES = (
    d006_inputs_not_identical,
    d014_weights_not_loaded,
    d007_layout_transposed,
    d013_dropout_mask,
    d008_parameter_unused,
    d015_batchnorm_mode,
    d017_loss_differs,
    d010_forward_differs,
    d011_layer_configured_differently,
    d002_grads_from_other_module,
    d012_trains_frozen_parameters,
    d001_step_result_discarded,
    d003_optimizer_state_without_model,
    d004_adam_epsilon,
    d005_optimizer_config,
    d009_update_differs,
)

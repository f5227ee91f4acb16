"""The seed pages' burn programs: what each prints, and what rustc says about the two that must not compile."""

from __future__ import annotations

import numpy as np

from burnside.burn.binary import run_binary
from burnside.burn.cargo import expect_compile_error


def run(programs, name, *args):
    return run_binary(programs.executables[name], list(args)).json


def test_s4_moves_grads_ids_and_the_returned_model(programs):
    out = run(programs, "moves")
    assert out["grads_len"] == 4 and out["get_is_some"] == [True, True]
    assert np.allclose(out["fc2_bias_grad"], [0.11327312141656876, 0.03841985762119293, -0.1516929566860199],
                       rtol=0, atol=1e-6)
    assert out["fc2_bias_before"] == [-0.0, -0.019999999552965164, -0.03999999910593033]
    assert out["clone_after"] == out["fc2_bias_before"] != out["fc2_bias_after"]
    assert out["param_id_unchanged"] and out["require_grad"]


def test_s4_param_ids_are_random_per_run(programs):
    assert run(programs, "moves")["ids"] != run(programs, "moves")["ids"]


def test_s6_gradients_paired_with_another_model_are_empty_and_change_nothing(programs):
    out = run(programs, "moves")
    assert out["other_grads_len"] == 0 and out["other_fc2_bias_changed"] is False


def test_s8_clone_discard_leaves_the_loss_bit_identical_without_a_warning(programs):
    out = run(programs, "train-one-discard")
    assert out["bits"][0] == out["bits"][1]
    assert programs.warnings("train-one-discard") == []


def test_s12_clone_version_stuck_fixed_version_matches_pytorch(programs):
    from burnside.examples.a1 import torch_losses

    out = run(programs, "discard", "sgd")
    assert len(set(out["clone_bits"])) == 1
    assert np.allclose(out["fixed"], torch_losses(3, "sgd"), rtol=0, atol=1.2e-7)
    assert np.allclose(out["fixed"], [1.1400574, 1.1059608, 1.075762], rtol=0, atol=1e-6)


def test_s13_new_adam_equals_fresh_and_reused_adam_drifts(programs):
    from burnside.examples.a1 import torch_losses

    out = run(programs, "discard", "adam")
    assert out["c_bits"] == out["b_bits"]
    assert abs(out["a"][4] - out["b"][4]) > 1e-4
    assert out["a"][0] == out["b"][0]  # the first post-fix loss is before any post-fix update
    assert np.allclose(out["b"], torch_losses(5, "adam"), rtol=0, atol=1e-6)


def test_s14_othergrads_empty_and_unchanged(programs):
    assert run(programs, "othergrads") == {"grads_len": 0, "fc2_bias_changed": False}


def test_s15_unused_results_names_mlp_on_the_step_line(programs):
    warnings = programs.warnings("lint")
    assert [w.code for w in warnings] == ["unused_results"]
    assert warnings[0].message == "unused result of type `Mlp`"
    assert warnings[0].file == "pitb-opt/src/bin/lint.rs"


def test_s7_noassign_is_e0382_with_a_clone_suggestion(programs):
    error = expect_compile_error("train-one", "noassign", "noassign")
    assert error.code == "E0382" and error.suggests_clone
    assert error.message == "borrow of moved value: `model`"


def test_s11_helper_is_e0507_with_a_clone_suggestion(programs):
    error = expect_compile_error("pitb-opt", "helper", "helper")
    assert error.code == "E0507" and error.suggests_clone
    assert "behind a mutable reference" in error.message


def test_the_must_not_compile_programs_stay_out_of_a_normal_build(programs):
    assert "noassign" not in programs.executables and "helper" not in programs.executables
    assert programs.returncode == 0


def test_s16_grads_len_assertion_is_live_and_stops_mismatched_gradients(programs):
    from burnside.burn.binary import expect_panic

    message = expect_panic(programs.executables["othergrads"], ["--checked"])
    assert "assertion `left == right` failed" in message
    assert "  left: 0\n right: 4" in message


def test_a_program_expected_to_panic_that_exits_cleanly_is_an_error(programs):
    import pytest

    from burnside.burn.binary import expect_panic
    from burnside.errors import RunError

    with pytest.raises(RunError, match="othergrads was expected to panic but exited with status 0"):
        expect_panic(programs.executables["othergrads"])

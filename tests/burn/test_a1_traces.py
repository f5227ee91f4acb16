"""A1 on burn (rust/train-step via burnside-trace) against A1 on PyTorch, number by number."""

from __future__ import annotations

import numpy as np
import pytest

from burnside.examples.a1 import SEED_ADAM_LOSSES
from burnside.compare import Tolerance, Tolerances, compare_traces
from burnside.compare.rows import is_optional

PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
SEED_BURN_SGD_LOSSES = [1.1400574, 1.1059608, 1.075762]


def losses(trace, steps):
    return [float(trace.array(f"step{k}.loss")) for k in range(steps)]


def bits(array):
    array = np.asarray(array)
    return array.view(np.uint32) if array.dtype == np.float32 else array


def test_one_sgd_step_every_tensor_within_1e6_of_pytorch(a1_trace):
    torch, burn = a1_trace("torch", "sgd", 1), a1_trace("burn", "sgd", 1)
    # PyTorch also records what each layer and the loss function were given, which a port need not
    required = {n for n in torch.names if not is_optional(n)}
    assert required == set(burn.names)
    comparison = compare_traces(torch, burn, Tolerances(Tolerance(atol=1e-6)))
    assert comparison.passed and not comparison.structure
    assert len(comparison.rows) == len(required) == 2 + 4 + 1 + 1 + 4 + 4 + 1
    assert 0 < comparison.worst <= 1.2e-7  # the page: one f32 ulp near 1, from the summation order


def test_inputs_and_initial_params_are_bit_identical_to_the_pytorch_side(a1_trace):
    torch, burn = a1_trace("torch", "sgd", 1), a1_trace("burn", "sgd", 1)
    for name in ["step0.inputs.x", "step0.inputs.y", *(f"step0.params_before.{p}" for p in PARAMS)]:
        assert burn.info(name).dtype == torch.info(name).dtype, name
        assert np.array_equal(bits(burn.array(name)), bits(torch.array(name))), name


def test_f32_arithmetic_changes_7_of_16_inputs_and_fc1_bias_5(a1_trace):
    exact, f32 = a1_trace("burn", "sgd", 1), a1_trace("burn", "sgd", 1, f32_inputs=True)
    x_ulps = np.abs(bits(exact.array("step0.inputs.x")).astype(np.int64)
                    - bits(f32.array("step0.inputs.x")).astype(np.int64)).ravel()
    assert np.count_nonzero(x_ulps) == 7
    assert x_ulps.max() == 3 and x_ulps[x_ulps > 0].min() == 1
    bias = np.flatnonzero(bits(exact.array("step0.params_before.fc1.bias"))
                          != bits(f32.array("step0.params_before.fc1.bias")))
    assert list(bias) == [5]
    assert float(f32.array("step0.params_before.fc1.bias")[5]) == 0.04999999701976776


def test_burn_sgd_losses_over_three_steps_match_the_page(a1_trace):
    got = losses(a1_trace("burn", "sgd", 3), 3)
    assert np.allclose(got, SEED_BURN_SGD_LOSSES, rtol=0, atol=1e-6), got
    assert got[0] > got[1] > got[2]


def test_burn_adam_eps_1e8_five_losses_match_pytorch(a1_trace):
    burn = a1_trace("burn", "adam", 5)
    got = losses(burn, 5)
    assert np.allclose(got, SEED_ADAM_LOSSES, rtol=0, atol=1e-6), got
    torch_losses = losses(a1_trace("torch", "adam", 5), 5)
    assert np.allclose(got, torch_losses, rtol=0, atol=1e-6)
    assert burn.metadata["optimizer"]["eps"] == 1e-8


def test_adam_state_is_recorded_in_pytorch_names_and_layout(a1_trace):
    torch, burn = a1_trace("torch", "adam", 5), a1_trace("burn", "adam", 5)
    optim = sorted(n for n in burn.names if ".optim." in n)
    assert optim == sorted(n for n in torch.names if ".optim." in n)
    assert burn.info("step0.optim.exp_avg.fc1.weight").shape == (8, 4)
    assert float(burn.array("step4.optim.step.fc2.bias")) == 5.0
    comparison = compare_traces(torch, burn, Tolerances(Tolerance(atol=1e-6)), only="step0.optim.*")
    assert comparison.rows and comparison.passed


def test_burn_trace_metadata_follows_the_format(a1_trace):
    meta = a1_trace("burn", "sgd", 3).metadata
    assert meta["framework"] == "burn" and meta["framework_version"] == "0.22.1"
    assert meta["steps"] == 3 and meta["grads_len"] == [4, 4, 4]
    assert meta["params"] == PARAMS
    assert meta["optimizer"] == {"name": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                                 "weight_decay": 0.0, "weight_decay_kind": "l2"}


@pytest.mark.parametrize("optim", ["sgd", "adam"])
def test_loss_after_is_the_last_step_only_and_is_0d(a1_trace, optim):
    burn = a1_trace("burn", optim, 5 if optim == "adam" else 3)
    after = [n for n in burn.names if n.endswith("loss_after")]
    assert len(after) == 1 and burn.info(after[0]).shape == ()

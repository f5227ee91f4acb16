"""The Adafactor and Muon replays of the optimizer forensics (D009) on real PyTorch traces: every step of a correct run
reproduced from its recorded tensors, a declared setting the updates do not follow missed at the first step it
shows in."""

from __future__ import annotations

import pytest
import torch

from burnside.examples.a1 import a1_data, a1_model
from burnside.optimizers.adafactor import replay_adafactor
from burnside.forensics.optimizer import measure_optimizer
from burnside.recording.reference import record_reference
from burnside.torch import record
from burnside.trace import open_trace


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A1 trained 3 steps by torch.optim.Adafactor(weight_decay=0.1, beta2_decay=-0.5), and its float64 reference."""
    path = tmp_path_factory.mktemp("adafactor")
    x, y = a1_data()

    def optimizer(model):
        return torch.optim.Adafactor(model.parameters(), lr=0.01, weight_decay=0.1, beta2_decay=-0.5)

    model = a1_model()
    reference = record_reference(model, optimizer(model), {"x": x, "y": y}, path / "r.safetensors", steps=3)
    model = a1_model()
    trace = record(model, optimizer(model), {"x": x, "y": y}, path / "t.safetensors", steps=3, activations=False)
    return open_trace(trace), open_trace(reference)


def test_a_correct_run_and_its_reference_are_reproduced_step_by_step(traces):
    for trace in traces:
        found = measure_optimizer(trace)
        assert found.mismatch_step is None, (found.mismatch_what, found.mismatch_residual)


def test_a_declared_setting_the_updates_do_not_follow_is_missed_where_it_shows(traces):
    trace, _ = traces
    config = trace.optimizer
    # beta2_decay weighs the second moments from the second step on (the first takes the means whole)
    other = {**config, "beta2_decay": -0.8}
    assert replay_adafactor(trace, other, 0, "fc1.weight", 0.01) is None
    what, residual = replay_adafactor(trace, other, 1, "fc1.weight", 0.01)
    assert what == "optim.row_var.fc1.weight" and residual > 1e-3
    # weight decay shows in every update
    what, residual = replay_adafactor(trace, {**config, "weight_decay": 0.0}, 0, "fc1.bias", 0.01)
    assert what == "params_after.fc1.bias" and residual > 0.1
    # burn's unscaled step (scale_parameter off) is another update; relative_step off is one only where
    # lr > 1/sqrt(step), never at lr 0.01 within 10,000 steps
    assert replay_adafactor(trace, {**config, "relative_step": False}, 2, "fc2.weight", 0.01) is None
    what, _ = replay_adafactor(trace, {**config, "scale_parameter": False}, 0, "fc2.weight", 0.01)
    assert what == "params_after.fc2.weight"


def test_muons_buffer_is_replayed_and_its_momentum_measured(tmp_path):
    """Muon's update is not replayed (bfloat16 Newton-Schulz); its moving-average buffer is, and shows the momentum."""
    x, y = a1_data()
    model = a1_model()
    weights = [model.fc1.weight, model.fc2.weight]
    for p in (model.fc1.bias, model.fc2.bias):
        p.requires_grad_(False)
    path = record(model, torch.optim.Muon(weights, lr=0.02, momentum=0.9), {"x": x, "y": y},
                  tmp_path / "muon.safetensors", steps=4, activations=False)
    trace = open_trace(path)
    found = measure_optimizer(trace)
    assert found.mismatch_step is None, (found.mismatch_what, found.mismatch_residual)
    assert found.measured["momentum"] == pytest.approx(0.9, abs=1e-5)
    # declared otherwise (burn's MomentumConfig::new() momentum, a port's trace claiming PyTorch's 0.95)
    trace.optimizer["momentum"] = 0.95
    found = measure_optimizer(trace)
    assert (found.mismatch_step, found.mismatch_what) == (0, "optim.momentum_buffer.fc1.weight")  # (1 - m) g

"""The PyTorch recorder and the A1 reference side, on real torch, against the seed's numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from burnside.examples.a1 import (
    SEED_ADAM_LOSSES,
    SEED_FC2_BIAS_GRAD,
    SEED_SGD_LOSSES,
    a1_arrays,
    record_torch,
)
from burnside.torch import export_init, record
from burnside.trace import open_trace

from .conftest import run_cli


def _losses(trace) -> list[float]:
    return [float(trace.array(f"step{k}.loss")) for k in range(trace.steps)]


def test_a1_sgd_three_steps_match_the_seed(tmp_path):
    trace = open_trace(record_torch(tmp_path / "sgd.safetensors", steps=3, optim="sgd"))
    assert _losses(trace) == pytest.approx(SEED_SGD_LOSSES, abs=1e-6)
    assert trace.array("step0.grads.fc2.bias").tolist() == pytest.approx(SEED_FC2_BIAS_GRAD, abs=1e-6)
    # The seed's own fc2.bias after one step.
    after = trace.array("step0.params_after.fc2.bias").tolist()
    assert after == pytest.approx([-0.01132731232792139, -0.023841984570026398, -0.02483070269227028], abs=1e-8)
    assert float(trace.array("step2.loss_after")) < _losses(trace)[-1]
    assert trace.metadata["grads_len"] == [4, 4, 4]
    assert trace.optimizer == {"name": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                               "weight_decay": 0.0, "weight_decay_kind": "l2"}


def test_a1_adam_five_steps_match_the_seed(tmp_path):
    trace = open_trace(record_torch(tmp_path / "adam.json", steps=5, optim="adam"))
    assert _losses(trace) == pytest.approx(SEED_ADAM_LOSSES, abs=1e-6)
    assert trace.optimizer["eps"] == 1e-8 and trace.optimizer["betas"] == [0.9, 0.999]
    assert float(trace.array("step4.optim.step.fc1.weight")) == 5.0
    assert trace.info("step4.optim.exp_avg.fc1.weight").shape == (8, 4)  # PyTorch layout [out, in]
    assert trace.info("step4.optim.exp_avg_sq.fc2.bias").shape == (3,)


def test_a1_inputs_and_weights_are_f64_rounded_once():
    arrays = a1_arrays()
    assert arrays["x"].dtype == np.float32 and arrays["x"].shape == (4, 4)
    assert arrays["x"].reshape(-1)[3] == np.float32(0.1 * 3 - 0.5)
    assert arrays["fc1.bias"][5] == np.float32(0.05000000074505806)
    assert arrays["fc2.bias"].tolist() == [-0.0, -0.019999999552965164, -0.03999999910593033]
    assert np.signbit(arrays["fc2.bias"][0])


def test_any_module_and_optimizer_states_are_recorded(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.Tanh(), nn.Linear(5, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    batches = [{"x": torch.randn(6, 3), "y": torch.randint(0, 2, (6,))} for _ in range(2)]
    trace = open_trace(record(model, opt, batches, tmp_path / "seq.safetensors"))
    assert trace.steps == 2
    assert trace.params == ["0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"]
    assert trace.optimizer["momentum"] == 0.9 and trace.optimizer["nesterov"] is True
    assert "step1.optim.momentum_buffer.1.weight" in trace
    assert not np.array_equal(trace.array("step0.inputs.x"), trace.array("step1.inputs.x"))
    assert np.array_equal(trace.array("step1.params_before.3.weight"), trace.array("step0.params_after.3.weight"))


def test_adamw_is_recorded_as_decoupled(tmp_path):
    model = nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    batch = {"x": torch.ones(1, 2), "y": torch.tensor([1])}
    trace = open_trace(record(model, opt, batch, tmp_path / "w.safetensors"))
    assert trace.optimizer["name"] == "adamw" and trace.optimizer["weight_decay_kind"] == "decoupled"


def test_export_init_holds_params_and_inputs_in_pytorch_layout(tmp_path):
    from burnside.examples.a1 import a1_data, a1_model

    x, y = a1_data()
    init = open_trace(export_init(a1_model(), {"x": x, "y": y}, tmp_path / "init.safetensors"), kind="init")
    assert init.info("params.fc1.weight").shape == (8, 4)
    assert init.info("inputs.y").dtype == "I64"
    assert np.array_equal(init.array("params.fc2.weight"), a1_arrays()["fc2.weight"])
    assert init.metadata["params"] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def test_export_init_writes_a_batch_per_step_only_where_the_batches_differ(tmp_path):
    from burnside.examples.a1 import a1_data, a1_model

    x, y = a1_data()
    batches = [{"x": x + k, "y": (y + k) % 3} for k in range(3)]
    init = open_trace(export_init(a1_model(), batches, tmp_path / "per-step.safetensors"), kind="init")
    assert sorted(n for n in init.names if "inputs" in n) == [
        "inputs.x", "inputs.y", "step1.inputs.x", "step1.inputs.y", "step2.inputs.x", "step2.inputs.y"]
    assert np.array_equal(init.array("inputs.x"), x.numpy())
    assert np.array_equal(init.array("step2.inputs.x"), (x + 2).numpy())
    assert init.info("step1.inputs.y").dtype == "I64" and init.metadata["inputs"] == ["x", "y"]
    # the same batch every step is one batch, as export_init of a single batch writes it
    same = open_trace(export_init(a1_model(), [{"x": x, "y": y}] * 3, tmp_path / "same.safetensors"), kind="init")
    assert sorted(n for n in same.names if "inputs" in n) == ["inputs.x", "inputs.y"]
    # -0.0 is another batch than +0.0: the comparison of inputs is bit for bit too
    zeros = [{"x": torch.zeros(2)}, {"x": -torch.zeros(2)}]
    signed = open_trace(export_init(a1_model(), zeros, tmp_path / "signed.safetensors"), kind="init")
    assert "step1.inputs.x" in signed.names


def test_export_init_refuses_batches_with_other_names(tmp_path):
    from burnside.examples.a1 import a1_data, a1_model
    from burnside.errors import BurnsideError

    x, y = a1_data()
    with pytest.raises(BurnsideError, match=r"step 1's batch has the inputs \['x'\], step 0's \['x', 'y'\]"):
        export_init(a1_model(), [{"x": x, "y": y}, {"x": x}], tmp_path / "init.safetensors")
    assert not (tmp_path / "init.safetensors").exists()


def test_run_a1_torch_side_writes_the_trace(tmp_path):
    out = tmp_path / "a1.json"
    proc = run_cli("run", "a1", "--side", "torch", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    trace = open_trace(out)
    assert float(trace.array("step0.loss")) == pytest.approx(SEED_SGD_LOSSES[0], abs=1e-6)
    names = [n for n in trace.names if not n.startswith(("step0.inputs", "step0.params_before"))]
    # what each Linear was fed (record's layer_inputs, on by default) and the cross-entropy's input and target
    assert names == ["step0.layer_inputs.fc1", "step0.layer_inputs.fc2", "step0.logits", "step0.loss_inputs.input",
                     "step0.loss_inputs.target", "step0.loss", "step0.grads.fc1.weight", "step0.grads.fc1.bias",
                     "step0.grads.fc2.weight", "step0.grads.fc2.bias", "step0.params_after.fc1.weight",
                     "step0.params_after.fc1.bias", "step0.params_after.fc2.weight",
                     "step0.params_after.fc2.bias", "step0.loss_after"]

"""The PyTorch recorder's buffers and activations: what a BatchNorm and a module tree leave in a trace."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from burnside.torch import export_init, record
from burnside.trace import open_trace, parse_name


class Shared(nn.Module):
    """A BatchNorm net that calls one Linear twice, to name the second call."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.bn = nn.BatchNorm1d(3)
        self.head = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.fc(self.bn(self.fc(x))))


def _batch():
    torch.manual_seed(1)
    return Shared(), {"x": torch.randn(6, 3), "y": torch.tensor([0, 1, 0, 1, 1, 0])}


def test_buffers_after_each_step_and_activations_in_execution_order(tmp_path):
    model, batch = _batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trace = open_trace(record(model, opt, batch, tmp_path / "t.safetensors", steps=2))
    assert trace.metadata["activations"] == ["fc", "bn", "fc#2", "head"]
    assert trace.metadata["modules"] == {"fc": "Linear", "bn": "BatchNorm1d", "fc#2": "Linear", "head": "Linear"}
    assert trace.metadata["buffers"] == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    step0 = [n for n in trace.names if n.startswith("step0.") and parse_name(n).stage in ("activations", "logits")]
    assert step0 == ["step0.activations.fc", "step0.activations.bn", "step0.activations.fc#2",
                     "step0.activations.head", "step0.logits"]
    assert np.array_equal(trace.array("step0.activations.head"), trace.array("step0.logits"))
    # After step k's forward: k+1 batches seen, the running mean moved from 0 toward the batch mean.
    assert int(trace.array("step1.buffers.bn.num_batches_tracked")) == 2
    assert trace.info("step0.buffers.bn.num_batches_tracked").dtype == "I64"
    with torch.no_grad():
        first = _batch()[0].fc(batch["x"]).mean(0)
    np.testing.assert_allclose(trace.array("step0.buffers.bn.running_mean"), 0.1 * first.numpy(), rtol=1e-6)
    # Buffers come after params_after in pipeline order; the hooks are gone after recording.
    names = list(trace.names)
    assert names.index("step0.buffers.bn.running_mean") > names.index("step0.params_after.head.bias")
    assert not model.fc._forward_hooks


def test_activations_can_be_turned_off_and_init_files_carry_buffers(tmp_path):
    model, batch = _batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trace = open_trace(record(model, opt, batch, tmp_path / "t.json", steps=1, activations=False))
    assert not any(parse_name(n).stage == "activations" for n in trace.names)
    assert "activations" not in trace.metadata and "step0.buffers.bn.running_var" in trace
    init = open_trace(export_init(_batch()[0], batch, tmp_path / "init.safetensors"), kind="init")
    assert init.metadata["buffers"] == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert init.array("buffers.bn.running_var").tolist() == [1.0, 1.0, 1.0]
    assert init.info("buffers.bn.num_batches_tracked").dtype == "I64"


def test_a_version_1_trace_without_the_new_stages_still_reads(tmp_path):
    from burnside.examples.a1 import record_torch

    trace = open_trace(record_torch(tmp_path / "a1.safetensors", steps=1))
    assert "buffers" not in trace.metadata and trace.params == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert trace.names[-1] == "step0.loss_after"

"""A loss of the output and the whole batch (a DQN's TD loss: Q-values gathered by the actions taken, a TD target
from a frozen target network) is measured from what the loss function inside it was given, on real PyTorch runs.

The PyTorch recorder finds the one `torch.nn.functional` loss call whose result is the loss and records its input
and target (`step{k}.loss_inputs.*`) and settings (`loss_call`). The port records none; D017 measures the port's
loss on PyTorch's loss inputs, which are the port's too wherever everything before the loss agrees.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace, write_trace


class QNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class TDLoss(nn.Module):
    """The TD loss of a DQN: its target network is a frozen copy of the online one."""

    def __init__(self, target: nn.Module, huber_delta: float | None = None) -> None:
        super().__init__()
        self.target = target
        self.huber_delta = huber_delta

    def forward(self, q: torch.Tensor, batch: dict) -> torch.Tensor:
        taken = q.gather(1, batch["action"].unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            best = self.target(batch["next_obs"]).max(1).values
            td = batch["reward"] + 0.99 * best * (1.0 - batch["done"])
        if self.huber_delta is not None:
            return F.huber_loss(taken, td, delta=self.huber_delta)
        return F.smooth_l1_loss(taken, td)


def _batches(steps: int) -> list[dict]:
    g = torch.Generator().manual_seed(3)
    return [{"x": torch.randn(32, 4, generator=g) * 2, "action": torch.randint(0, 3, (32,), generator=g),
             "reward": torch.randn(32, generator=g) * 3, "next_obs": torch.randn(32, 4, generator=g) * 2,
             "done": (torch.rand(32, generator=g) < 0.2).float()} for _ in range(steps)]


def _run(path, huber_delta=None, steps=3):
    torch.manual_seed(0)
    online = QNet()
    target = QNet()
    target.load_state_dict(online.state_dict())
    return record(online, torch.optim.RMSprop(online.parameters(), lr=1e-2), _batches(steps), path, steps=steps,
                  loss_fn=TDLoss(target, huber_delta), target=None)


def _as_port(tmp_path, path):
    """The run rewritten as a burn port's trace: no loss inputs (burn records none), burn's framework."""
    trace = open_trace(path)
    tensors = {n: np.asarray(trace.array(n)) for n in trace.names if ".loss_inputs." not in n}
    meta = {k: v for k, v in trace.metadata.items() if k not in ("loss_call", "modules", "activations",
                                                                 "layer_inputs")}
    return write_trace(tmp_path / "port.safetensors", tensors, {**meta, "framework": "burn",
                                                                "framework_version": "0.22.1"})


def test_the_loss_call_inside_a_td_loss_is_recorded(tmp_path):
    trace = open_trace(_run(tmp_path / "a.safetensors"))
    assert trace.metadata["loss_call"] == {"fn": "smooth_l1_loss", "reduction": "mean", "beta": 1.0}
    assert trace.info("step0.loss_inputs.input").shape == (32,)
    assert trace.info("step0.loss_inputs.target").shape == (32,)
    # the loss function's result is the loss: recomputed from the recorded operands it is the recorded loss
    x, t = (np.asarray(trace.values(f"step1.loss_inputs.{n}"), dtype=np.float64) for n in ("input", "target"))
    e = np.abs(x - t)
    loss = np.where(e < 1.0, 0.5 * e * e, e - 0.5).mean()
    assert abs(loss - float(trace.values("step1.loss"))) < 1e-6 * abs(loss)


def test_a_port_with_huber_delta_half_is_named_by_the_loss_it_computes(tmp_path):
    a = _run(tmp_path / "a.safetensors")
    b = _as_port(tmp_path, _run(tmp_path / "b0.safetensors", huber_delta=0.5))
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    assert not comparison.passed
    found = diagnose(comparison)
    assert found and found[0].rule == "D017", [d.rule for d in found]
    assert "SmoothL1 with beta 1" in found[0].evidence and "Huber with delta 0.5" in found[0].evidence
    assert "SmoothL1LossConfig::new().with_beta(1.0)" in found[0].fix  # an f32 literal, as burn's setter takes


def test_the_faithful_td_port_is_ok_with_no_diagnosis(tmp_path):
    a = _run(tmp_path / "a.safetensors")
    comparison = compare_with_evidence(open_trace(a), open_trace(_as_port(tmp_path, a)))
    assert comparison.passed and not diagnose(comparison)


def test_a_loss_that_is_no_single_call_records_no_loss_inputs(tmp_path):
    torch.manual_seed(0)
    model = QNet()

    def two_terms(out, y):
        return F.cross_entropy(out, y) + 0.01 * out.pow(2).mean()

    path = record(model, torch.optim.SGD(model.parameters(), lr=0.1),
                  {"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))}, tmp_path / "a.safetensors",
                  loss_fn=two_terms)
    trace = open_trace(path)
    assert "loss_call" not in trace.metadata
    assert not [n for n in trace.names if ".loss_inputs." in n]

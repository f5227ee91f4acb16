"""A loss of the model's output and the whole batch: `record(..., target=None)` calls ``loss_fn(output, batch)``.

A DQN update (a TD target from a frozen target network the loss holds, SmoothL1 on the taken actions) and a masked
loss, each recorded with its float64 reference: a faithful re-run is OK with no diagnosis, another discount FAILs at
the loss while the outputs agree.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.pipeline import compare_with_evidence
from burnside.trace import open_trace
from burnside.torch import record

STEPS = 3


class _QNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 16), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class TDLoss(nn.Module):
    """SmoothL1 between Q(s, a) and r + gamma * max_a' Q_target(s', a'), the target network frozen."""

    def __init__(self, target_net: nn.Module, gamma: float) -> None:
        super().__init__()
        self.target_net, self.gamma = target_net, gamma
        self.target_net.requires_grad_(False)

    def forward(self, q: torch.Tensor, batch: dict) -> torch.Tensor:
        with torch.no_grad():
            best = self.target_net(batch["next_x"]).max(dim=1).values
        td = batch["reward"] + self.gamma * best * (1 - batch["done"])
        return F.smooth_l1_loss(q.gather(1, batch["action"].unsqueeze(1)).squeeze(1), td)


def _dqn(gamma: float = 0.99) -> tuple[nn.Module, torch.optim.Optimizer, list[dict], TDLoss]:
    torch.manual_seed(0)
    online = _QNet()
    loss = TDLoss(copy.deepcopy(online), gamma)
    opt = torch.optim.RMSprop(online.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(8, 6, generator=g), "next_x": torch.randn(8, 6, generator=g),
                "action": torch.randint(0, 3, (8,), generator=g), "reward": torch.randn(8, generator=g),
                "done": (torch.rand(8, generator=g) < 0.2).float()} for _ in range(STEPS)]
    return online, opt, batches, loss


def test_td_loss_with_a_frozen_target_network(tmp_path) -> None:
    online, opt, batches, loss = _dqn()
    record(online, opt, batches, tmp_path / "a.safetensors", loss_fn=loss, target=None,
           reference=tmp_path / "ref.safetensors")
    meta = open_trace(tmp_path / "a.safetensors").metadata
    assert meta["loss_fn"] == "TDLoss" and meta["loss_input"] == "batch" and "target" not in meta
    assert open_trace(tmp_path / "ref.safetensors").metadata["loss_input"] == "batch"
    online, opt, batches, loss = _dqn()
    record(online, opt, batches, tmp_path / "same.safetensors", loss_fn=loss, target=None)
    same = compare_with_evidence(tmp_path / "a.safetensors", tmp_path / "same.safetensors",
                                 reference=tmp_path / "ref.safetensors")
    assert same.passed and not diagnose(same)
    online, opt, batches, loss = _dqn(gamma=0.9)
    record(online, opt, batches, tmp_path / "b.safetensors", loss_fn=loss, target=None)
    other = compare_with_evidence(tmp_path / "a.safetensors", tmp_path / "b.safetensors",
                                  reference=tmp_path / "ref.safetensors")
    assert not other.passed
    # both sides record what the loss function inside the TD loss was given: the TD target parts first
    assert other.first_divergence.name == "step0.loss_inputs.target"
    (found,) = diagnose(other)
    assert found.rule == "D010" and "the loss function (smooth_l1_loss)" in found.evidence
    assert "discount" in found.fix


def _masked_mse(output: torch.Tensor, batch: dict) -> torch.Tensor:
    mask = batch["mask"]
    return ((output - batch["y"]) ** 2 * mask).sum() / mask.sum()


def test_masked_loss_function_reads_the_batch(tmp_path) -> None:
    def loop() -> tuple[nn.Module, torch.optim.Optimizer, dict]:
        torch.manual_seed(0)
        model = _QNet()
        g = torch.Generator().manual_seed(2)
        batch = {"x": torch.randn(8, 6, generator=g), "y": torch.randn(8, 3, generator=g),
                 "mask": (torch.rand(8, 3, generator=g) < 0.7).float()}
        return model, torch.optim.SGD(model.parameters(), lr=0.1), batch

    model, opt, batch = loop()
    record(model, opt, batch, tmp_path / "a.safetensors", steps=2, loss_fn=_masked_mse, target=None,
           reference=tmp_path / "ref.safetensors")
    assert open_trace(tmp_path / "a.safetensors").metadata["loss_fn"] == "_masked_mse"
    model, opt, batch = loop()
    record(model, opt, batch, tmp_path / "b.safetensors", steps=2, loss_fn=_masked_mse, target=None)
    same = compare_with_evidence(tmp_path / "a.safetensors", tmp_path / "b.safetensors",
                                 reference=tmp_path / "ref.safetensors")
    assert same.passed and not diagnose(same)


def test_a_loss_function_holding_a_float32_network_is_refused_for_the_reference(tmp_path) -> None:
    online, opt, batches, loss = _dqn()
    with pytest.raises(BurnsideError, match="make the loss an nn.Module holding them"):
        record(online, opt, batches, tmp_path / "a.safetensors", loss_fn=lambda q, b: loss(q, b), target=None,
               reference=tmp_path / "ref.safetensors")
    assert not (tmp_path / "ref.safetensors").exists() and not (tmp_path / "a.safetensors").exists()


def test_a_batch_without_the_target_is_refused_in_one_line(tmp_path) -> None:
    online, opt, batches, _ = _dqn()
    with pytest.raises(BurnsideError, match="the batch has no 'y'.*target=None"):
        record(online, opt, batches, tmp_path / "a.safetensors")


def test_named_loss_and_target_in_the_metadata(tmp_path) -> None:
    online, opt, batches, _ = _dqn()
    record(online, opt, batches, tmp_path / "a.safetensors", target="action",
           loss_fn=lambda q, a: F.cross_entropy(q, a), metadata={"loss_fn": "cross_entropy"})
    meta = open_trace(tmp_path / "a.safetensors").metadata
    assert meta["loss_fn"] == "cross_entropy" and meta["target"] == "action"

"""A pooling layer measured at the first divergence (D011, `compare.layers.pool`): average pooling where the model max
pools, another window, and the same pooling on a correct port, on real PyTorch forward passes."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.compare.layers.settings import measure_layer
from burnside.pipeline import compare_with_evidence
from burnside.trace import open_trace
from tests.diagnose.forward_traces import burn_side, torch_side


class Net(nn.Module):
    def __init__(self, pool: nn.Module, conv=nn.Conv2d) -> None:
        super().__init__()
        self.conv = conv(3, 6, 3, padding=1)
        self.act = nn.ReLU()
        self.pool = pool
        self.head = nn.LazyLinear(4)

    def forward(self, x):
        return self.head(self.pool(self.act(self.conv(x))).flatten(1))


def _run(tmp_path, model: nn.Module, pool: nn.Module, *shape: int, float64: bool = False):
    torch.manual_seed(1)
    batches = [{"x": torch.randn(*shape)} for _ in range(2)]
    model(batches[0]["x"])  # the lazy head takes its shape
    port = copy.deepcopy(model)
    port.pool = pool
    a = open_trace(torch_side(model, batches, tmp_path / "a.safetensors"))
    b = open_trace(burn_side(port, batches, tmp_path / "b.safetensors", float64=float64))
    comparison = compare_with_evidence(a, b)
    return comparison, {d.rule: d for d in diagnose(comparison)}, (a, b)


@pytest.mark.parametrize(("ours", "theirs", "a_says", "b_says", "fix"), [
    (nn.MaxPool2d(2), nn.AvgPool2d(2), "max, window 2x2, stride 2, padding 0", "avg, window 2x2, stride 2, padding 0",
     "`MaxPool2dConfig::new([2, 2]).with_strides([2, 2])"),
    (nn.AvgPool2d(2), nn.MaxPool2d(2), "avg, window 2x2, stride 2, padding 0", "max, window 2x2, stride 2, padding 0",
     "`AvgPool2dConfig::new([2, 2])"),
    # a window copied from another layer: 3 with padding 1 gives the same 4x4 output as 2 from 8x8
    (nn.MaxPool2d(3, stride=2, padding=1), nn.MaxPool2d(2), "max, window 3x3, stride 2, padding 1",
     "max, window 2x2, stride 2, padding 0", "PaddingConfig2d::Explicit(1, 1, 1, 1)"),
], ids=["avg-for-max", "max-for-avg", "window"])
def test_a_pooling_of_another_kind_or_window_is_measured(tmp_path, ours, theirs, a_says, b_says, fix):
    torch.manual_seed(0)
    comparison, found, _ = _run(tmp_path, Net(ours), theirs, 2, 3, 8, 8)
    assert comparison.first_divergence.name == "step0.activations.pool"
    assert set(found) == {"D011"}, found
    evidence = found["D011"].evidence
    assert f"A (pytorch) pools with {a_says}" in evidence and f"B (burn) with {b_says}" in evidence, evidence
    assert fix in found["D011"].fix, found["D011"].fix


def test_a_conv1d_net_s_pooling_is_measured(tmp_path):
    torch.manual_seed(0)
    _, found, _ = _run(tmp_path, Net(nn.MaxPool1d(2), conv=nn.Conv1d), nn.AvgPool1d(2), 2, 3, 10)
    assert "A (pytorch) pools with max, window 2, stride 2, padding 0" in found["D011"].evidence, found
    assert "`MaxPool1dConfig::new(2).with_stride(2)" in found["D011"].fix


def test_a_correct_port_s_pooling_measures_the_same_on_both_sides(tmp_path):
    torch.manual_seed(0)
    _, found, (a, b) = _run(tmp_path, Net(nn.AvgPool2d(3, stride=2, padding=1)),
                                     nn.AvgPool2d(3, stride=2, padding=1), 2, 3, 9, 9, float64=True)
    assert not found, found
    layer = measure_layer(a, b, "step0.activations.pool")
    assert layer.measured["a"] == layer.measured["b"] == {"pool": "avg, window 3x3, stride 2, padding 1"}
    assert not layer.differing()

"""D011 on real PyTorch runs: each side's layer settings measured from its own tensors, and silence
where the recorded activation before a layer is not its input."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from burnside.pipeline import compare_with_evidence
from burnside.diagnose import diagnose
from burnside.torch import record
from burnside.trace import open_trace


class Net(nn.Module):
    """Linear -> norm -> GELU -> Linear, with the layer settings a port may get wrong."""

    def __init__(self, norm: str, eps: float = 1e-5, momentum: float = 0.1, gelu: str = "none") -> None:
        super().__init__()
        self.fc = nn.Linear(6, 8, bias=False)
        self.norm = nn.BatchNorm1d(8, eps=eps, momentum=momentum) if norm == "bn" else nn.LayerNorm(8, eps=eps)
        self.act = nn.GELU(approximate=gelu)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.norm(self.fc(x))))


class Residual(nn.Module):
    """A LayerNorm fed by a residual sum: the activation recorded before it is not its input."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8, eps=eps)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x + self.fc(x)))


class NormFirst(nn.Module):
    """A BatchNorm on the model's input: no activation before it, its input is `inputs.x`."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(6, eps=eps)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x))


def _compare(tmp_path, make_a, make_b, features: int = 6, forward_b=None, layer_inputs: bool = False):
    """Both sides recorded by PyTorch; without ``layer_inputs`` (traces that do not hold what each module was fed),
    a layer is measured from the activation recorded before it."""
    paths = []
    for side, make in (("a", make_a), ("b", make_b)):
        torch.manual_seed(0)
        model = make()
        batch = {"x": torch.randn(16, features) * 3, "y": torch.randint(0, 3, (16,))}
        kwargs = {"forward": forward_b} if side == "b" and forward_b is not None else {}
        paths.append(record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, tmp_path / f"{side}.json",
                            steps=2, layer_inputs=layer_inputs, **kwargs))
    comparison = compare_with_evidence(open_trace(paths[0]), open_trace(paths[1]))
    return comparison, [d for d in diagnose(comparison) if d.rule == "D011"]


@pytest.mark.parametrize(("norm", "eps"), [("bn", 1e-3), ("ln", 1e-3), ("ln", 1e-6)])
def test_a_different_epsilon_is_measured_on_each_side(tmp_path, norm, eps):
    comparison, (found,) = _compare(tmp_path, lambda: Net(norm), lambda: Net(norm, eps=eps))
    layer = comparison.evidence.layer
    assert (layer.module, layer.step, layer.input) == ("norm", 0, "step0.activations.fc")
    assert layer.measured["a"]["epsilon"] == pytest.approx(1e-5, rel=0.05)
    assert layer.measured["b"]["epsilon"] == pytest.approx(eps, rel=0.05)
    kind = "BatchNorm1d" if norm == "bn" else "LayerNorm"
    assert found.evidence.startswith(f"norm ({kind}) at step 0: epsilon measured 1e-5 on A (pytorch), ")
    assert ".with_epsilon(1e-5)" in found.fix
    doc = json.loads(json.dumps(layer.to_dict(), allow_nan=False))
    assert doc["differing"] == [["epsilon", layer.measured["a"]["epsilon"], layer.measured["b"]["epsilon"]]]


def test_a_first_layer_is_measured_from_the_model_input(tmp_path):
    comparison, (found,) = _compare(tmp_path, NormFirst, lambda: NormFirst(eps=1e-3))
    assert comparison.evidence.layer.input == "step0.inputs.x"
    assert comparison.evidence.layer.measured["b"]["epsilon"] == pytest.approx(1e-3, rel=0.05)
    assert "epsilon measured 1e-5 on A (pytorch), 0.001 on B (pytorch)" in found.evidence


def test_a_batchnorm_momentum_shows_in_the_running_mean(tmp_path):
    comparison, (found,) = _compare(tmp_path, lambda: Net("bn"), lambda: Net("bn", momentum=0.9))
    assert comparison.first_divergence.name == "step0.buffers.norm.running_mean"
    assert comparison.evidence.layer.measured["a"]["momentum"] == pytest.approx(0.1, abs=1e-5)
    assert comparison.evidence.layer.measured["b"]["momentum"] == pytest.approx(0.9, abs=1e-5)
    assert "momentum measured 0.1 on A (pytorch), 0.9 on B (pytorch)" in found.evidence
    assert "with_momentum(0.1)" in found.fix


def test_the_momentum_is_measured_from_the_previous_step_s_running_mean(tmp_path):
    """Momentum 0.1 at step 0 on both sides, 0.5 from step 1 on B: the first divergence is at step 1."""
    calls = []

    def forward(model, batch):
        calls.append(None)
        model.norm.momentum = 0.1 if len(calls) == 1 else 0.5
        return model(batch["x"])

    comparison, (found,) = _compare(tmp_path, lambda: Net("bn"), lambda: Net("bn"), forward_b=forward)
    assert comparison.first_divergence.name == "step1.buffers.norm.running_mean"
    assert comparison.evidence.layer.step == 1
    assert comparison.evidence.layer.measured["a"]["momentum"] == pytest.approx(0.1, abs=1e-5)
    assert comparison.evidence.layer.measured["b"]["momentum"] == pytest.approx(0.5, abs=1e-5)
    assert "at step 1: momentum measured 0.1 on A (pytorch), 0.5 on B (pytorch)" in found.evidence


def test_gelu_s_tanh_approximation_is_told_from_the_erf_form(tmp_path):
    comparison, (found,) = _compare(tmp_path, lambda: Net("ln"), lambda: Net("ln", gelu="tanh"))
    layer = comparison.evidence.layer
    assert (layer.module, layer.kind, layer.input) == ("act", "GELU", "step0.activations.norm")
    assert layer.measured == {"a": {"gelu": "erf"}, "b": {"gelu": "tanh"}}
    assert layer.residuals["a"]["erf"] < 1e-6 and layer.residuals["a"]["tanh"] > 1e-4
    assert "B (pytorch) the tanh approximation" in found.evidence
    assert "`burn::tensor::activation::gelu`" in found.fix


class QuickGelu(nn.Module):
    """CLIP's `x * sigmoid(1.702 x)`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


@pytest.mark.parametrize(("act", "form", "shown"), [
    (nn.SiLU, "silu", "SiLU, x sigmoid(x), not a GELU"),
    (nn.ReLU, "relu", "ReLU, not a GELU"),
    (QuickGelu, "quick", "the quick GELU x sigmoid(1.702 x)"),
])
def test_another_activation_in_a_gelu_s_place_is_named(tmp_path, act, form, shown):
    """A port's SiLU, ReLU or quick GELU where PyTorch has nn.GELU: named, where it got a generic D010."""
    def port():
        net = Net("ln")
        net.act = act()
        return net

    comparison, (found,) = _compare(tmp_path, lambda: Net("ln"), port)
    layer = comparison.evidence.layer
    assert layer.measured == {"a": {"gelu": "erf"}, "b": {"gelu": form}}, layer.measured
    assert found.rule == "D011" and shown in found.evidence, found
    assert "`burn::tensor::activation::gelu`" in found.fix


def test_a_layernorm_after_a_residual_sum_is_not_measured(tmp_path):
    comparison, found = _compare(tmp_path, Residual, lambda: Residual(eps=1e-2), features=8)
    assert comparison.first_divergence.name == "step0.activations.norm"
    assert comparison.evidence.layer is None and not found, (
        "the activation before it (fc) is not its input: say nothing")


def test_a_layernorm_after_a_residual_sum_is_measured_from_what_it_was_fed(tmp_path):
    # record's default: each module's input is recorded, so a norm fed a residual sum is measured all the same
    comparison, found = _compare(tmp_path, Residual, lambda: Residual(eps=1e-2), features=8, layer_inputs=True)
    layer = comparison.evidence.layer
    assert (layer.module, layer.input) == ("norm", "step0.layer_inputs.norm")
    assert layer.measured["a"]["epsilon"] == pytest.approx(1e-5, rel=0.05)
    assert layer.measured["b"]["epsilon"] == pytest.approx(1e-2, rel=0.05)
    assert found and "epsilon" in found[0].evidence


def test_a_batchnorm_in_eval_mode_in_a_training_step_is_named_by_its_statistics(tmp_path):
    """B's BatchNorm in eval mode normalizes with the running statistics: D015 names it, D011 compares
    no epsilon fitted under other statistics."""

    def forward(model, batch):
        model.norm.eval()
        return model(batch["x"])

    comparison, found = _compare(tmp_path, lambda: Net("bn"), lambda: Net("bn"), forward_b=forward)
    assert comparison.first_divergence.name == "step0.activations.norm"
    layer = comparison.evidence.layer
    assert layer.measured["a"]["statistics"] == "batch" and layer.measured["b"]["statistics"] == "running"
    assert layer.measured["a"]["epsilon"] == pytest.approx(1e-5, rel=0.05)
    assert layer.residuals["b"]["batch"] > 1e-3 and layer.residuals["b"]["running"] < 1e-5
    assert layer.differing() == [("statistics", "batch", "running")] and not found
    (d015,) = [d for d in diagnose(comparison) if d.rule == "D015"]
    assert "B (pytorch)'s BatchNorm runs in eval mode" in d015.evidence
    assert "model.train()" in d015.fix
    assert not [d for d in diagnose(comparison) if d.rule == "D010"]

"""D011 on the norms and activations a port of a UNet or a small GPT carries (RMSNorm, InstanceNorm,
GroupNorm, LayerNorm without affine, PReLU) and convolutions in a training trace, D010 pointing at the
code after the last agreeing layer or before a layer that reads a sum, and silence on a correct port.

Forward traces: A is `record_forward` of a PyTorch model, B the same recorder over PyTorch code carrying
the port's fault, written as a burn port's trace (`forward_traces.burn_side`). Training traces:
`burnside.torch.record` on both sides.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.compare.layers.settings import measure_layer
from burnside.compare.layers.norms import F32_EPS
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace
from tests.diagnose.forward_traces import burn_side, torch_side


def _forward(tmp_path, model: nn.Module, port: nn.Module, batches, **burn):
    a = torch_side(model, batches, tmp_path / "a.safetensors")
    b = burn_side(port, batches, tmp_path / "b.safetensors", eval=True, **burn)
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    return comparison, {d.rule: d for d in diagnose(comparison)}


def _training(tmp_path, make_a, make_b, x: torch.Tensor, steps: int = 2):
    paths = []
    for side, make in (("a", make_a), ("b", make_b)):
        torch.manual_seed(0)
        model = make()
        batch = {"x": x, "y": torch.randint(0, 3, (x.shape[0],), generator=torch.Generator().manual_seed(1))}
        paths.append(record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, tmp_path / f"{side}.json",
                            steps=steps, layer_inputs=False))  # measured from the activation before the layer
    comparison = compare_with_evidence(open_trace(paths[0]), open_trace(paths[1]))
    return comparison, {d.rule: d for d in diagnose(comparison)}


def _batches(*shape: int, scale: float = 1.0, n: int = 2) -> list[dict[str, torch.Tensor]]:
    torch.manual_seed(1)
    return [{"x": torch.randn(*shape) * scale} for _ in range(n)]


def _rms_model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.RMSNorm(8), nn.Linear(8, 3)).eval()
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
    return model


# 1. RMSNorm's epsilon, burn's default 1e-5 against PyTorch's eps=None


@pytest.mark.parametrize("eps", [1e-5, 1e-6])
def test_an_rmsnorm_epsilon_is_measured_against_pytorch_s_none(tmp_path, eps):
    model = _rms_model()
    port = copy.deepcopy(model)
    port[1].eps = eps
    comparison, found = _forward(tmp_path, model, port, _batches(4, 5, 6, scale=0.05))
    layer = comparison.evidence.layer
    assert (layer.module, layer.kind, layer.input) == ("1", "RMSNorm", "step0.layer_inputs.1")
    assert layer.measured["a"]["epsilon"] == F32_EPS
    assert layer.measured["b"]["epsilon"] == pytest.approx(eps, rel=0.05)
    assert layer.residuals["b"]["epsilon_at_a"] > 10 * layer.residuals["b"]["epsilon"]
    assert set(found) == {"D011"}, found
    assert "epsilon measured 1.1920929e-7 on A (pytorch)" in found["D011"].evidence
    assert "`RmsNormConfig::new(d_model).with_epsilon(1.1920929e-7)`" in found["D011"].fix
    assert "torch.finfo(float32).eps" in found["D011"].fix


# 2. InstanceNorm: epsilon, affine, running statistics


class Unet(nn.Module):
    """Conv -> InstanceNorm -> PReLU -> GroupNorm -> pool -> Linear."""

    def __init__(self, affine: bool = True, track: bool = False, prelu: int = 4, groups: int = 2,
                 trained: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.up_norm = nn.InstanceNorm2d(4, affine=affine, track_running_stats=track)
        self.act = nn.PReLU(prelu)
        self.gn = nn.GroupNorm(groups, 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(4, 3)
        with torch.no_grad():  # a trained model's values (``trained=False``: the layers' own initial ones)
            if trained:
                self.act.weight.uniform_(0.05, 0.5)
                self.gn.weight.uniform_(0.5, 1.5)
            if affine and trained:
                self.up_norm.weight.uniform_(0.5, 1.5)
                self.up_norm.bias.uniform_(-0.3, 0.3)
            if track and trained:
                self.up_norm.running_mean.uniform_(-0.3, 0.3)
                self.up_norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.head(self.pool(self.gn(self.act(self.up_norm(self.conv(x))))).flatten(1))


def _unet(**kwargs) -> nn.Module:
    torch.manual_seed(0)
    return Unet(**kwargs).eval()


def test_an_instancenorm_epsilon_is_measured(tmp_path):
    model = _unet()
    port = copy.deepcopy(model)
    port.up_norm.eps = 1e-3
    comparison, found = _forward(tmp_path, model, port, _batches(2, 3, 6, 6))
    layer = comparison.evidence.layer
    assert (layer.module, layer.kind) == ("up_norm", "InstanceNorm2d")
    assert layer.measured["a"]["normalised_by"] == layer.measured["b"]["normalised_by"] == "each sample"
    assert layer.measured["a"]["epsilon"] == pytest.approx(1e-5, rel=0.05)
    assert layer.measured["b"]["epsilon"] == pytest.approx(1e-3, rel=0.05)
    assert set(found) == {"D011"}, found
    assert "`InstanceNormConfig::new(channels).with_epsilon(1e-5)`" in found["D011"].fix


def test_an_instancenorm_with_running_statistics_is_told_from_one_without(tmp_path):
    """PyTorch's track_running_stats=True normalises by the buffers in eval mode; burn's InstanceNorm
    always by each sample's own statistics (and keeps no buffers)."""
    model = _unet(track=True)
    port = copy.deepcopy(model)
    port.up_norm.track_running_stats = False
    port.up_norm.running_mean = port.up_norm.running_var = port.up_norm.num_batches_tracked = None
    comparison, found = _forward(tmp_path, model, port, _batches(2, 3, 6, 6))
    layer = comparison.evidence.layer
    assert layer.measured["a"]["normalised_by"] == "running statistics"
    assert layer.measured["b"]["normalised_by"] == "each sample"
    assert layer.residuals["a"]["running statistics"] < 1e-6 and layer.residuals["a"]["each sample"] > 1e-2
    assert "D011" in found and "D010" not in found, found
    assert "is normalised by running statistics on A (pytorch) and by each sample on B (burn)" in \
        found["D011"].evidence
    assert "burn's InstanceNorm has none" in found["D011"].fix and "running_var" in found["D011"].fix
    assert not [d for d in found.values() if "epsilon" in d.evidence.split(":", 1)[0]]


def _unet_train(**kwargs):
    return lambda: Unet(**kwargs)


def test_burn_s_affine_instancenorm_where_pytorch_s_has_none_is_named_in_training(tmp_path):
    """burn's InstanceNorm defaults to affine, PyTorch's to none: the weight trains and the layer parts at step 1."""
    torch.manual_seed(2)
    comparison, found = _training(tmp_path, _unet_train(affine=False, trained=False),
                                  _unet_train(affine=True, trained=False),
                                  torch.randn(4, 3, 6, 6))
    layer = comparison.evidence.layer
    assert (layer.module, layer.step, layer.input) == ("up_norm", 1, "step1.activations.conv")
    assert layer.measured["a"]["affine"] == "none" and layer.measured["b"]["affine"] == "weight and bias"
    assert layer.differing() == [("affine", "none", "weight and bias")]
    assert "D011" in found, found
    assert "has none on A (pytorch) and weight and bias on B (pytorch)" in found["D011"].evidence
    assert "`InstanceNormConfig::new(channels).with_affine(false)`" in found["D011"].fix


def test_a_layernorm_without_affine_is_named_with_burn_s_functional_form(tmp_path):
    torch.manual_seed(2)
    comparison, found = _training(
        tmp_path, lambda: nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8, elementwise_affine=False), nn.Linear(8, 3)),
        lambda: nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3)), torch.randn(8, 6))
    layer = comparison.evidence.layer
    assert (layer.module, layer.step) == ("1", 1)
    assert layer.measured["a"]["epsilon"] == layer.measured["b"]["epsilon"] == pytest.approx(1e-5)
    assert layer.differing() == [("affine", "none", "weight and bias")]
    assert "D011" in found and "D010" not in found, found
    assert "burn::tensor::module::layer_norm(x, Tensor::ones([d_model], &device), None, 1e-5)" in found["D011"].fix


def test_a_groupnorm_s_number_of_groups_is_measured_in_training(tmp_path):
    torch.manual_seed(2)
    comparison, found = _training(tmp_path, _unet_train(groups=2), _unet_train(groups=4), torch.randn(4, 3, 6, 6))
    layer = comparison.evidence.layer
    assert (layer.module, layer.step, layer.input) == ("gn", 0, "step0.activations.act")
    assert layer.differing() == [("groups", "2", "4")]
    assert "`GroupNormConfig::new(2, channels)`" in found["D011"].fix


# 3. PReLU


def test_a_leaky_relu_where_pytorch_has_a_prelu_is_measured_by_its_slope(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.PReLU(), nn.Flatten(), nn.Linear(144, 3)).eval()
    port = copy.deepcopy(model)
    port[1] = nn.LeakyReLU(0.01)
    comparison, found = _forward(tmp_path, model, port, _batches(2, 3, 6, 6))
    layer = comparison.evidence.layer
    assert layer.measured["a"] == {"slopes": "one", "slope": 0.25}
    assert layer.measured["b"]["slope"] == pytest.approx(0.01, rel=1e-5)
    assert "PReLU slope 0.25 on A (pytorch), 0.01 on B (burn)" in found["D011"].evidence
    assert "`PReluConfig::new().with_alpha(0.25)`" in found["D011"].fix


def test_one_shared_slope_where_pytorch_has_one_per_channel_is_measured(tmp_path):
    model = _unet()
    port = copy.deepcopy(model)
    port.act = nn.PReLU()
    comparison, found = _forward(tmp_path, model, port, _batches(2, 3, 6, 6))
    layer = comparison.evidence.layer
    assert (layer.module, layer.kind) == ("act", "PReLU")
    assert layer.differing() == [("slopes", "per channel (4)", "one")]
    assert "a slope per channel (4) on A (pytorch) and one shared slope on B (burn)" in found["D011"].evidence
    assert "`PReluConfig::new().with_num_parameters(4)`" in found["D011"].fix


# 4. Convolutions in a training trace


@pytest.mark.parametrize(("setting", "shown"), [("padding", "padding (0, 0)"), ("stride", "stride (2, 2)")])
def test_a_conv_s_stride_or_padding_is_measured_in_a_training_trace(tmp_path, setting, shown):
    def make(**kwargs):
        return lambda: nn.Sequential(nn.Conv2d(3, 4, 3, **({"padding": 1} | kwargs)), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))

    torch.manual_seed(2)
    wrong = {"padding": 0} if setting == "padding" else {"stride": 2}
    comparison, found = _training(tmp_path, make(), make(**wrong), torch.randn(4, 3, 6, 6))
    layer = comparison.evidence.layer
    assert (layer.module, layer.step, layer.input) == ("0", 0, "step0.inputs.x")
    assert layer.measured["b"][setting] == shown.split(" ", 1)[1]
    assert shown in found["D011"].evidence and "D010" not in found
    assert ".with_stride([1, 1]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))" in found["D011"].fix


# 5. D010: after the last tap, and a layer reading a sum


class Gpt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(11, 8)
        self.wpe = nn.Embedding(6, 8)
        self.ln_1 = nn.LayerNorm(8)
        self.head = nn.Linear(8, 11)
        self.sign, self.dim = 1.0, -1

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        h = self.ln_1(self.wte(idx) + self.sign * self.wpe(pos))
        return self.head(h).log_softmax(self.dim)


def _tokens() -> list[dict[str, torch.Tensor]]:
    torch.manual_seed(1)
    return [{"x": torch.randint(0, 11, (3, 6))} for _ in range(2)]


def test_logits_that_differ_after_every_agreeing_layer_point_after_the_last_one(tmp_path):
    torch.manual_seed(0)
    model = Gpt().eval()
    port = copy.deepcopy(model)
    port.dim = 1  # a softmax over the positions where PyTorch's is over the vocabulary
    comparison, found = _forward(tmp_path, model, port, _tokens())
    assert comparison.first_divergence.name == "step0.outputs.output"
    assert set(found) == {"D010"}, found
    assert "every layer output recorded at step 0 agrees (4 of them, the last head)" in found["D010"].evidence
    assert found["D010"].fix.startswith("compare the code after head and before the model's output ")
    assert "layer order" not in found["D010"].fix


def test_training_logits_that_differ_after_the_last_layer_point_after_it(tmp_path):
    class Net(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 4)
            self.dim = dim

        def forward(self, x):
            return self.fc(x).view(2, 4, 4).max(self.dim).values  # the target needs max(1)

    torch.manual_seed(2)
    comparison, found = _training(tmp_path, lambda: Net(1), lambda: Net(2), torch.randn(8, 6).view(2, 4, 6))
    assert comparison.first_divergence.name == "step0.logits"
    assert "D010" in found, found
    assert "the last fc" in found["D010"].evidence
    assert "compare the code after fc and before the logits" in found["D010"].fix


def test_a_layer_reading_a_sum_of_embeddings_names_its_input(tmp_path):
    torch.manual_seed(0)
    model = Gpt().eval()
    port = copy.deepcopy(model)
    port.sign = -1.0
    comparison, found = _forward(tmp_path, model, port, _tokens())
    layer = comparison.evidence.layer
    assert comparison.first_divergence.name == "step0.activations.ln_1"
    assert (layer.before, layer.input_is_before, layer.measured["b"]) == ("wpe", False, {})
    assert set(found) == {"D010"}, found
    assert "ln_1 does not read wpe's output" in found["D010"].evidence
    assert "the layer's input already differs on B (burn)" in found["D010"].evidence
    assert found["D010"].fix.startswith("compare the code that computes ln_1's input (after wpe, before ln_1)")


# 6. A correct port gets no diagnosis


class Everything(nn.Module):
    """Every layer above, the per-channel and the shared PReLU, running statistics and none."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 3, padding=1)
        self.inorm = nn.InstanceNorm1d(8, affine=True)
        self.act = nn.PReLU(8)
        self.tnorm = nn.InstanceNorm1d(8, track_running_stats=True)
        self.gn = nn.GroupNorm(2, 8)
        self.shared = nn.PReLU()
        self.ln = nn.LayerNorm(12, elementwise_affine=False)
        self.rms = nn.RMSNorm(12)
        self.head = nn.Linear(12, 4)
        with torch.no_grad():
            for norm in (self.inorm, self.gn, self.rms):
                norm.weight.uniform_(0.5, 1.5)
            self.act.weight.uniform_(0.05, 0.5)
            self.tnorm.running_mean.uniform_(-0.3, 0.3)
            self.tnorm.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        h = self.shared(self.gn(self.tnorm(self.act(self.inorm(self.conv(x))))))
        return self.head(self.rms(self.ln(h)).mean(1))


def _correct_port(model: nn.Module) -> nn.Module:
    """The port, with RMSNorm's epsilon pinned to float32's (a float64 copy's eps=None would be float64's)."""
    port = copy.deepcopy(model)
    port.rms.eps = F32_EPS
    return port


@pytest.mark.filterwarnings("ignore:TF32 acceleration")
@pytest.mark.parametrize("how", ["float64", "summation order"])
def test_a_correct_port_of_these_layers_gets_no_diagnosis(tmp_path, how):
    torch.manual_seed(0)
    model = Everything().eval()

    def reordered(model, batch):
        with torch.backends.mkldnn.flags(enabled=False):
            return model(batch["x"])

    kwargs = {"float64": True} if how == "float64" else {"forward": reordered}
    comparison, found = _forward(tmp_path, model, _correct_port(model), _batches(5, 3, 12, n=3), **kwargs)
    assert not found, found
    assert comparison.evidence.layer is None
    apart = [r.name for r in comparison.rows if r.stage == "activations" and r.stats.max_abs > 0]
    assert apart, "the port's forward is bit-identical: a rounding difference was meant"


@pytest.mark.parametrize("batch", [0, 2])
def test_every_layer_of_a_correct_port_measures_the_same_on_both_sides(tmp_path, batch):
    torch.manual_seed(0)
    model = Everything().eval()
    batches = _batches(5, 3, 12, n=3)
    a = open_trace(torch_side(model, batches, tmp_path / "a.safetensors"))
    b = open_trace(burn_side(_correct_port(model), batches, tmp_path / "b.safetensors", float64=True, eval=True))
    measured = {}
    for module in ("conv", "inorm", "act", "tnorm", "gn", "shared", "ln", "rms"):
        layer = measure_layer(a, b, f"step{batch}.activations.{module}")
        assert layer is not None, module
        assert not layer.differing(), (module, layer.measured)
        measured[module] = layer.measured["b"]
    assert measured["inorm"]["normalised_by"] == "each sample" and measured["inorm"]["affine"] == "weight and bias"
    assert measured["tnorm"]["normalised_by"] == "running statistics" and measured["tnorm"]["affine"] == "none"
    assert measured["act"]["slopes"] == "per channel (8)"
    assert measured["shared"] == {"slopes": "one", "slope": pytest.approx(0.25)}
    assert measured["ln"]["affine"] == "none" and measured["rms"]["epsilon"] == F32_EPS
    assert measured["gn"]["groups"] == "2"

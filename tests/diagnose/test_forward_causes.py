"""The named causes of a forward trace's divergence, on real PyTorch forward passes: a BatchNorm in
training mode on one side (D015), a dropout active at inference (D013), a layer's settings measured
from its own recorded input (D011), and silence on a correct port."""

from __future__ import annotations

import copy

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.compare.layers.settings import measure_layer
from burnside.forensics.dropout import measure_dropout
from burnside.pipeline import compare_with_evidence
from burnside.trace import open_trace, write_trace
from tests.diagnose.forward_traces import BurnDropout, burn_side, torch_side


def _batches(*shape: int, n: int = 2, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    return [{"x": torch.randn(*shape)} for _ in range(n)]


def _compare(tmp_path, model: nn.Module, port: nn.Module, batches, *, mode: str = "inference", a_eval: bool = True,
             b_eval: bool = False, **burn):
    """A: record_forward of ``model``; B: ``port`` as a burn port's trace (its modes as given unless b_eval)."""
    a = torch_side(model, batches, tmp_path / "a.safetensors", eval=a_eval)
    b = burn_side(port, batches, tmp_path / "b.safetensors", mode=mode, eval=b_eval, **burn)
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    return comparison, {d.rule: d for d in diagnose(comparison)}


def _trained_bn(bn: nn.Module) -> nn.Module:
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.3, 0.3)
    return bn


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = _trained_bn(nn.BatchNorm2d(4))
        self.act = nn.GELU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(self.pool(self.act(self.bn(self.conv(x)))).flatten(1))


# 1. BatchNorm in training mode on one side


def test_a_burn_batchnorm_on_an_autodiff_device_is_named_by_its_batch_statistics(tmp_path):
    torch.manual_seed(0)
    model = ConvNet().eval()
    port = copy.deepcopy(model)
    port.bn.train()
    comparison, found = _compare(tmp_path, model, port, _batches(4, 3, 6, 6), mode="autodiff")
    assert comparison.first_divergence.name == "step0.activations.bn"
    layer = comparison.evidence.layer
    assert layer.input == "step0.layer_inputs.bn" and layer.input_from_a
    assert layer.measured["a"]["statistics"] == "running" and layer.measured["b"]["statistics"] == "batch"
    assert layer.residuals["a"]["running"] < 1e-6 and layer.residuals["a"]["batch"] > 1e-2
    assert layer.residuals["b"]["batch"] < 1e-6 and layer.residuals["b"]["running"] > 1e-2
    assert set(found) == {"D015"}, found
    assert "B (burn)'s BatchNorm runs in training mode" in found["D015"].evidence
    assert "its trace says mode autodiff" in found["D015"].evidence
    assert "`Device::default()` (not `.autodiff()`)" in found["D015"].fix and "model.valid()" in found["D015"].fix


def test_a_pytorch_batchnorm_left_in_training_mode_is_named_on_the_pytorch_side(tmp_path):
    """A recorded with eval=False (its BatchNorm1d in training mode), B's in eval mode: A is the side to fix."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 6), _trained_bn(nn.BatchNorm1d(6)), nn.ReLU(), nn.Linear(6, 2))
    port = copy.deepcopy(model).eval()
    model.train()
    comparison, found = _compare(tmp_path, model, port, _batches(8, 5), a_eval=False)
    assert comparison.first_divergence.name == "step0.activations.1"
    assert "A (pytorch)'s BatchNorm runs in training mode" in found["D015"].evidence
    assert "model.eval()" in found["D015"].fix
    assert "D010" not in found and "D011" not in found


def test_a_batchnorm_fed_through_a_transpose_is_measured_from_its_recorded_input(tmp_path):
    """The tap before the BatchNorm1d ([n, seq, ch]) is not its input ([n, ch, seq]): layer_inputs is."""

    class Seq(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 6)
            self.bn = _trained_bn(nn.BatchNorm1d(6))

        def forward(self, x):
            return self.bn(self.fc(x).transpose(1, 2))

    torch.manual_seed(0)
    model = Seq().eval()
    port = copy.deepcopy(model)
    port.bn.train()
    comparison, found = _compare(tmp_path, model, port, _batches(3, 7, 4), mode="autodiff")
    assert comparison.evidence.layer.input == "step0.layer_inputs.bn"
    assert set(found) == {"D015"}, found


# 2. Dropout on at inference


class DropNet(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 32)
        self.drop = nn.Dropout(p)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.drop(torch.relu(self.fc(x))))


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_a_dropout_active_at_inference_is_measured(tmp_path, p):
    torch.manual_seed(0)
    model = DropNet(p).eval()
    port = copy.deepcopy(model)
    port.drop = BurnDropout(p)
    comparison, found = _compare(tmp_path, model, port, _batches(64, 6), mode="autodiff")
    assert comparison.first_divergence.name == "step0.activations.drop"
    dropout = comparison.evidence.dropout
    assert (dropout.side, dropout.module) == ("b", "drop")
    assert dropout.p == pytest.approx(p, rel=1e-4)
    assert abs(dropout.zeroed / dropout.n - p) < 0.06
    assert set(found) == {"D013"}, found
    assert f"p = {p:.3g}: a dropout with probability {p:.2g} is active at inference on B (burn)" \
        in found["D013"].evidence
    assert "`Device::default()`" in found["D013"].fix and "DropoutConfig::new(0.0)" in found["D013"].fix


def test_a_dropout_inside_a_block_is_measured_at_the_block_s_output(tmp_path):
    """The port taps only the block (its output is the dropout's): the dropout it holds is named."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 16)
            self.drop = nn.Dropout(0.2)

        def forward(self, x):
            return self.drop(torch.tanh(self.fc(x)))

    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("block", Block())
    model.add_module("head", nn.Linear(16, 2))
    model.eval()
    port = copy.deepcopy(model)
    port.block.drop = BurnDropout(0.2)
    a = torch_side(model, _batches(50, 6), tmp_path / "a.safetensors")
    b = burn_side(port, _batches(50, 6), tmp_path / "b.safetensors", mode="autodiff", eval=False)
    # the port taps the block and the head, not the dropout inside the block
    trace = open_trace(b)
    kept = {n: np.array(trace.array(n)) for n in trace.names if ".activations.block.fc" not in n
            and ".activations.block.drop" not in n}
    metadata = trace.metadata | {"activations": ["block", "head"]}
    b.unlink()
    write_trace(b, kept, metadata)
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    found = {d.rule: d for d in diagnose(comparison)}
    assert comparison.first_divergence.name == "step0.activations.block"
    assert comparison.evidence.dropout.module == "block.drop"
    assert comparison.evidence.dropout.p == pytest.approx(0.2, rel=1e-4)
    assert set(found) == {"D013"}, found
    assert "(block.drop)" in found["D013"].evidence


def test_a_port_s_dropout_on_in_a_training_trace_is_measured_too(tmp_path):
    """A training step, PyTorch recorded with dropout off (record's default), the port's dropout on: D013's
    training-trace text, with p measured."""
    from burnside.torch import record

    paths = []
    for side in ("a", "b"):
        torch.manual_seed(0)
        model = DropNet(0.25)
        if side == "b":
            model.drop = BurnDropout(0.25)
        batch = {"x": torch.randn(64, 6), "y": torch.randint(0, 3, (64,))}
        paths.append(record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, tmp_path / f"{side}.json"))
    port = open_trace(paths[1])
    tensors = {n: np.array(port.array(n)) for n in port.names}
    metadata = {k: v for k, v in port.metadata.items() if k != "dropout"} | {"framework": "burn"}
    paths[1].unlink()
    write_trace(paths[1], tensors, metadata)
    comparison = compare_with_evidence(open_trace(paths[0]), open_trace(paths[1]))
    assert comparison.evidence.dropout.p == pytest.approx(0.25, rel=1e-4)
    (found,) = [d for d in diagnose(comparison) if d.rule == "D013"]
    assert "so the other side's dropout is on; measured: B (burn)'s values are A (pytorch)'s" in found.evidence
    assert "p = 0.25" in found.evidence and "DropoutConfig::new(0.0)" in found.fix


def test_dropout_on_on_both_sides_stays_the_random_mask():
    """D013's training-trace pair, both sides' dropouts on: two masks, no side's values are the other's
    zeroed and scaled, nothing is measured."""
    fixtures = Path(__file__).parent / "fixtures"
    comparison = compare_with_evidence(open_trace(fixtures / "d013_bad.a.json"),
                                       open_trace(fixtures / "d013_bad.b.json"))
    assert comparison.evidence.dropout is None
    found = {d.rule: d for d in diagnose(comparison)}
    assert "never match" in found["D013"].evidence


# 3. D011 from the layer's own recorded input


class Transposed(nn.Module):
    """Linear -> transpose -> LayerNorm -> slice -> GELU: no tap before a layer is its input."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.ln = nn.LayerNorm(5)
        self.act = nn.GELU()

    def forward(self, x):
        h = self.ln(self.fc(x).transpose(1, 2))
        return self.act(h[:, :, 1:] * 3)


@pytest.mark.parametrize("eps", [1e-6, 1e-12, 1e-3])
def test_a_layernorm_epsilon_is_measured_after_a_transpose(tmp_path, eps):
    torch.manual_seed(0)
    model = Transposed().eval()
    port = copy.deepcopy(model)
    port.ln.eps = eps
    comparison, found = _compare(tmp_path, model, port, _batches(4, 5, 4, seed=3))
    layer = comparison.evidence.layer
    assert (layer.module, layer.input) == ("ln", "step0.layer_inputs.ln")
    assert layer.measured["a"]["epsilon"] == pytest.approx(1e-5, rel=0.05)
    if eps < 1e-5:
        assert layer.measured["b"]["epsilon"] < 2e-6
    else:
        assert layer.measured["b"]["epsilon"] == pytest.approx(eps, rel=0.05)
    assert set(found) == {"D011"}, found
    assert ".with_epsilon(1e-5)" in found["D011"].fix
    assert "(the layer's input as A recorded it" in found["D011"].evidence


def test_a_gelu_after_a_slice_is_told_tanh_from_erf(tmp_path):
    torch.manual_seed(0)
    model = Transposed().eval()
    port = copy.deepcopy(model)
    port.act.approximate = "tanh"
    comparison, found = _compare(tmp_path, model, port, _batches(4, 5, 4, seed=3))
    assert comparison.evidence.layer.measured == {"a": {"gelu": "erf"}, "b": {"gelu": "tanh"}}
    assert set(found) == {"D011"}, found


def test_without_layer_inputs_a_layer_after_a_transpose_is_not_measured(tmp_path):
    """Today's behaviour kept: the tap before the LayerNorm is not its input, nothing is measured."""
    torch.manual_seed(0)
    model = Transposed().eval()
    port = copy.deepcopy(model)
    port.ln.eps = 1e-3
    a = torch_side(model, _batches(4, 5, 4, seed=3), tmp_path / "a.safetensors", layer_inputs=False)
    b = burn_side(port, _batches(4, 5, 4, seed=3), tmp_path / "b.safetensors")
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    assert comparison.first_divergence.name == "step0.activations.ln"
    assert comparison.evidence.layer is None
    assert "D011" not in {d.rule for d in diagnose(comparison)}


def test_a_batchnorm_epsilon_in_eval_mode_is_measured_from_the_running_statistics(tmp_path):
    torch.manual_seed(0)
    model = ConvNet().eval()
    port = copy.deepcopy(model)
    port.bn.eps = 1e-3
    comparison, found = _compare(tmp_path, model, port, _batches(2, 3, 6, 6))
    layer = comparison.evidence.layer
    assert layer.measured["a"]["statistics"] == layer.measured["b"]["statistics"] == "running"
    assert layer.measured["b"]["epsilon"] == pytest.approx(1e-3, rel=0.05)
    assert set(found) == {"D011"}, found
    assert "BatchNormConfig::new(channels).with_epsilon(1e-5)" in found["D011"].fix
    # burn's BatchNorm has no affine=False: a note of a BatchNorm without weights, which this one has
    assert "no-affine" not in found["D011"].fix, found["D011"].fix


def test_a_groupnorm_epsilon_is_measured(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(2, 6, 3), nn.GroupNorm(3, 6), nn.ReLU()).eval()
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
    port = copy.deepcopy(model)
    port[1].eps = 1e-3
    comparison, found = _compare(tmp_path, model, port, _batches(2, 2, 9))
    layer = comparison.evidence.layer
    assert layer.measured["a"]["groups"] == layer.measured["b"]["groups"] == "3"
    assert layer.measured["b"]["epsilon"] == pytest.approx(1e-3, rel=0.05)
    assert "GroupNormConfig::new(groups, channels).with_epsilon(1e-5)" in found["D011"].fix


@pytest.mark.parametrize(("setting", "value", "shown"), [
    ("stride", (2, 2), "stride (2, 2)"),          # another output shape
    ("padding", (0, 0), "padding (0, 0)"),        # another output shape
    ("dilation", (2, 2), "dilation (2, 2)"),      # with padding 2: the same shape as padding 1, dilation 1
])
def test_a_conv2d_s_settings_are_solved_from_the_shape_and_confirmed_by_value(tmp_path, setting, value, shown):
    torch.manual_seed(0)
    model = ConvNet().eval()
    port = copy.deepcopy(model)
    setattr(port.conv, setting, value)
    if setting == "dilation":
        port.conv.padding = (2, 2)
    comparison, found = _compare(tmp_path, model, port, _batches(2, 3, 8, 8))
    layer = comparison.evidence.layer
    assert layer.module == "conv" and layer.input == "step0.layer_inputs.conv"
    assert (layer.measured["a"]["stride"], layer.measured["a"]["padding"], layer.measured["a"]["dilation"]) == \
        ("(1, 1)", "(1, 1)", "(1, 1)")
    assert shown.split(" ", 1)[1] == layer.measured["b"][setting]
    assert "D011" in found, found
    assert "D010" not in found
    assert "B (burn) with " in found["D011"].evidence and shown in found["D011"].evidence
    assert ".with_stride([1, 1]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)).with_dilation([1, 1])" \
        in found["D011"].fix


@pytest.mark.parametrize(("setting", "value", "shown"), [
    ("padding", (1, 1), "padding (1, 1)"),  # copied from a 3x3 conv: the same 4x4 patches, other values
    ("stride", (4, 4), "stride (4, 4)"),    # 7x7 patches where PyTorch makes 4x4
])
def test_a_patch_embedding_s_stride_of_its_kernel_is_measured(tmp_path, setting, value, shown):
    """A ViT's patch embedding, Conv2d(kernel 8, stride 8): strides up to the kernel's size are tried (only 1-4 were,
    so neither side was measured and a padding slip got a generic D010). A conv measured by its zero-padded
    formula pads with zeros: the note about burn having no reflect padding is left out, as is the one about
    `Same` and dilation at dilation 1."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 6, 8, stride=8), nn.Flatten(2)).eval()
    port = copy.deepcopy(model)
    setattr(port[0], setting, value)
    comparison, found = _compare(tmp_path, model, port, _batches(2, 3, 32, 32))
    layer = comparison.evidence.layer
    assert (layer.measured["a"]["stride"], layer.measured["a"]["padding"]) == ("(8, 8)", "(0, 0)"), layer.measured
    assert layer.measured["b"][setting] == shown.split(" ", 1)[1], layer.measured
    assert "D011" in found and "D010" not in found, found
    assert ".with_stride([8, 8]).with_padding(PaddingConfig2d::Explicit(0, 0, 0, 0))" in found["D011"].fix
    assert "padding_mode" not in found["D011"].fix and "ignores the dilation" not in found["D011"].fix, \
        found["D011"].fix


def test_a_conv1d_stride_is_measured(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(3, 5, 4), nn.ReLU()).eval()
    port = copy.deepcopy(model)
    port[0].stride = (3,)
    comparison, found = _compare(tmp_path, model, port, _batches(2, 3, 20))
    assert comparison.evidence.layer.measured["b"]["stride"] == "3"
    assert "with_stride(1)" in found["D011"].fix


def test_a_gru_read_over_the_other_axis_is_measured_from_its_input(tmp_path):
    class Rnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.gru = nn.GRU(4, 5)

        def forward(self, x):
            return self.gru(torch.tanh(self.fc(x)))[0]

    torch.manual_seed(0)
    model = Rnn().eval()
    port = copy.deepcopy(model)
    port.gru.batch_first = True
    comparison, found = _compare(tmp_path, model, port, _batches(6, 3, 3))
    layer = comparison.evidence.layer
    assert layer.input == "step0.layer_inputs.gru"
    assert layer.measured == {"a": {"layout": "seq-first"}, "b": {"layout": "batch-first"}}
    assert set(found) == {"D011"}, found


# 4. A correct port gets no diagnosis


class Everything(nn.Module):
    """Conv, BatchNorm, GELU, a transpose, LayerNorm, GRU, GroupNorm, dropout, Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 3, padding=1)
        self.bn = _trained_bn(nn.BatchNorm1d(8))
        self.act = nn.GELU()
        self.gn = nn.GroupNorm(2, 8)
        self.ln = nn.LayerNorm(8)
        self.gru = nn.GRU(8, 6, batch_first=True)
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(6, 4)

    def forward(self, x):
        h = self.gn(self.act(self.bn(self.conv(x))))
        h = self.ln(h.transpose(1, 2))
        h = self.drop(self.gru(h)[0])
        return self.head(h[:, -1])


@pytest.mark.filterwarnings("ignore:TF32 acceleration")
@pytest.mark.parametrize("how", ["float64", "summation order"])
def test_a_correct_port_gets_no_diagnosis(tmp_path, how):
    torch.manual_seed(0)
    model = Everything().eval()
    port = copy.deepcopy(model)

    def reordered(model, batch):
        # the same forward through other kernels (no oneDNN), which sum in another order
        with torch.backends.mkldnn.flags(enabled=False):
            return model(batch["x"])

    kwargs = {"float64": True} if how == "float64" else {"forward": reordered}
    comparison, found = _compare(tmp_path, model, port, _batches(5, 3, 12, n=3), b_eval=True, **kwargs)
    assert not found, found
    assert comparison.evidence.layer is None and comparison.evidence.dropout is None
    apart = [r.name for r in comparison.rows if r.stage == "activations" and r.stats.max_abs > 0]
    assert apart, "the port's forward is bit-identical: a rounding difference was meant"


@pytest.mark.parametrize("batch", [0, 2])
def test_every_layer_of_a_correct_port_measures_the_same_on_both_sides(tmp_path, batch):
    """Each measurable layer measured as if it were the first divergence: the same settings on both sides
    (rounding apart), no dropout, so no cause is named wherever compare's tolerance would stop."""
    torch.manual_seed(0)
    model = Everything().eval()
    batches = _batches(5, 3, 12, n=3)
    a = open_trace(torch_side(model, batches, tmp_path / "a.safetensors"))
    b = open_trace(burn_side(copy.deepcopy(model), batches, tmp_path / "b.safetensors", float64=True, eval=True))
    measured = {}
    for module in ("conv", "bn", "act", "gn", "ln", "gru"):
        layer = measure_layer(a, b, f"step{batch}.activations.{module}")
        assert layer is not None, module
        assert not layer.differing(), (module, layer.measured)
        assert measure_dropout(a, b, f"step{batch}.activations.{module}") is None
        measured[module] = layer.measured["b"]
    assert measured["conv"] == {"stride": "1", "padding": "1", "dilation": "1"}
    assert measured["bn"]["statistics"] == "running" and measured["bn"]["epsilon"] == pytest.approx(1e-5, rel=0.05)
    assert measured["gn"]["groups"] == "2" and measured["act"] == {"gelu": "erf"}
    assert measured["gru"] == {"layout": "batch-first"}


class _Encoder(nn.Module):
    """torchvision's ViT encoder in small: a position embedding the module holds itself, beside its layers, added to
    its input in its own forward (``add_pos`` False: a port that leaves the addition out)."""

    def __init__(self, add_pos: bool = True) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.randn(1, 5, 8) * 0.2)
        self.ln = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 3)
        self.add_pos = add_pos

    def forward(self, x):
        return self.fc(self.ln(x + self.pos_embedding if self.add_pos else x))


class _Vit(nn.Module):
    def __init__(self, add_pos: bool = True) -> None:
        super().__init__()
        self.encoder = _Encoder(add_pos)

    def forward(self, x):
        return self.encoder(x)


def test_a_parameter_a_module_holds_itself_and_the_port_never_reads_is_told_its_use_not_a_layer(tmp_path):
    """A ViT port that never adds `encoder.pos_embedding` (graph capture finds it unread: `Comparison.unread`, which
    `compare.aligned` measures from the captured graph) had been told "the port leaves encoder (Encoder) out of its
    forward: apply encoder"; the parameter is the module's own, beside its layers, and the fix says its use."""
    torch.manual_seed(0)
    model, port = _Vit(), _Vit(add_pos=False)
    port.load_state_dict(model.state_dict())
    batches = _batches(2, 5, 8)
    a = torch_side(model, batches, tmp_path / "a.safetensors")
    b = burn_side(port, batches, tmp_path / "b.safetensors")
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    comparison.unread = ["encoder.pos_embedding"]  # what the capture of such a port finds
    found = {d.rule: d for d in diagnose(comparison)}
    assert "held by encoder (_Encoder) itself, beside its layers" in found["D008"].evidence, found["D008"].evidence
    assert "a position embedding: added to the tokens, `x + pos_embedding.val()`" in found["D008"].fix
    assert "apply encoder" not in found["D008"].fix
    # a layer's own parameter left unread is still told to apply the layer
    comparison.unread = ["encoder.fc.weight", "encoder.fc.bias"]
    found = {d.rule: d for d in diagnose(comparison)}
    assert "apply encoder.fc (Linear)" in found["D008"].fix, found["D008"].fix

"""What a layer at the first divergence read on the port's side (`forensics.reads`): an activation left out,
added or of another form before it, a residual left out or added, on real PyTorch forward and training passes.

Before this, each of these got D010's generic "computes something else between fc1 and fc2": the right layer,
no cause. Side B is the PyTorch model with the slip built in, written as a burn port's trace (no layer inputs,
no module classes); A is `record_forward`'s (or `record`'s) trace of the faithful model.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from burnside.diagnose import diagnose
from burnside.forensics.reads import measure_reads
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace
from tests.diagnose.forward_traces import as_burn, burn_side, torch_side


class Mlp(nn.Module):
    """fc1, a functional activation (no module: nothing records its output), fc2."""

    def __init__(self, act=F.gelu) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 4)
        self.act = act

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """A pre-norm residual block: x + attn(ln1(x)), then + mlp(ln2(.)); ``how`` builds a residual slip in."""

    def __init__(self, how: str = "faithful") -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(8)
        self.attn = nn.Linear(8, 8)
        self.ln2 = nn.LayerNorm(8)
        self.mlp = nn.Linear(8, 8)
        self.how = how

    def forward(self, x):
        h = self.ln1(x)
        a = self.attn(h)
        x = {"faithful": x + a, "no-residual": a, "residual-normed": h + a, "twice": x + x + a}[self.how]
        return x + self.mlp(self.ln2(x))


class ConvNet(nn.Module):
    def __init__(self, act=F.relu) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 4, 3, stride=2)
        self.act = act

    def forward(self, x):
        return self.conv2(self.act(self.conv1(x))).mean((2, 3))


class Blocks(nn.Module):
    def __init__(self, how: str = "faithful") -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block(how))

    def forward(self, x):
        return self.blocks(x)


def _found(tmp_path, model: nn.Module, port: nn.Module, *shape: int):
    torch.manual_seed(1)
    batches = [{"x": torch.randn(*shape)} for _ in range(2)]
    a = torch_side(model, batches, tmp_path / "a.safetensors")
    b = burn_side(port, batches, tmp_path / "b.safetensors")
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    return comparison, {d.rule: d for d in diagnose(comparison)}


def _port(model: nn.Module, **changes) -> nn.Module:
    port = copy.deepcopy(model)
    for name, value in changes.items():
        setattr(port, name, value)
    return port


# 1. an activation left out, of another form, or added


CASES = [
    # (A's activation, B's, what B's fc2 is found to read, what A's reads, words of the fix)
    (F.gelu, lambda x: x, "`fc1`", "`gelu(fc1)`", "apply a GELU (erf form) to fc1 before fc2"),
    (F.gelu, F.relu, "`relu(fc1)`", "`gelu(fc1)`", "use a GELU (erf form) between fc1 and fc2"),
    (F.gelu, F.silu, "`silu(fc1)`", "`gelu(fc1)`", "not a SiLU"),
    (F.relu, lambda x: x, "`fc1`", "`relu(fc1)`", "apply a ReLU to fc1 before fc2"),
    (torch.tanh, torch.sigmoid, "`sigmoid(fc1)`", "`tanh(fc1)`", "use a tanh between fc1 and fc2"),
    (lambda x: x, F.relu, "`relu(fc1)`", "`fc1`", "feed fc2 fc1 as it is"),
    (F.gelu, lambda x: F.gelu(x, approximate="tanh"), "`gelu_tanh(fc1)`", "`gelu(fc1)`", "not a GELU (tanh"),
]


@pytest.mark.parametrize(("ours", "theirs", "read", "reads", "fix"), CASES,
                         ids=["gelu-missing", "relu-for-gelu", "silu-for-gelu", "relu-missing", "sigmoid-for-tanh",
                              "relu-added", "gelu-tanh-functional"])
def test_an_activation_between_two_layers_is_named_from_what_the_layer_read(tmp_path, ours, theirs, read, reads, fix):
    torch.manual_seed(0)
    model = Mlp(ours)
    comparison, found = _found(tmp_path, model, _port(model, act=theirs), 5, 6)
    assert comparison.first_divergence.name == "step0.activations.fc2"
    assert set(found) == {"D010"}, found
    evidence = found["D010"].evidence
    assert f"B (burn)'s output is fc2 of {read}" in evidence, evidence
    assert f"where A's fc2 reads {reads}" in evidence, evidence
    assert fix in found["D010"].fix, found["D010"].fix
    assert comparison.evidence.reads.b_residual < 1e-6


def test_a_conv_net_s_missing_relu_is_named(tmp_path):
    torch.manual_seed(0)
    model = ConvNet()
    comparison, found = _found(tmp_path, model, _port(model, act=lambda x: x), 2, 3, 9, 9)
    assert comparison.first_divergence.name == "step0.activations.conv2"
    assert "B (burn)'s output is conv2 of `conv1`" in found["D010"].evidence, found["D010"].evidence
    assert "apply a ReLU to conv1 before conv2" in found["D010"].fix


# 2. a residual left out, or added


RESIDUALS = [
    ("no-residual", "`blocks.1.attn`", "`blocks.1.attn + blocks.1's input`",
     "add blocks.1's input to what blocks.1.ln2 reads (a residual connection left out)"),
    # a residual added to the normed input, where PyTorch adds the block's input
    ("residual-normed", "`blocks.1.attn + blocks.1.ln1`", "`blocks.1.attn + blocks.1's input`",
     "feed blocks.1.ln2 what the PyTorch forward feeds it"),
]


@pytest.mark.parametrize(("how", "read", "reads", "fix"), RESIDUALS, ids=[c[0] for c in RESIDUALS])
def test_a_residual_in_the_wrong_place_is_named_at_the_norm_that_reads_it(tmp_path, how, read, reads, fix):
    torch.manual_seed(0)
    model = Blocks()
    port = copy.deepcopy(model)
    port.blocks[1].how = how
    comparison, found = _found(tmp_path, model, port, 2, 5, 8)
    assert comparison.first_divergence.name == "step0.activations.blocks.1.ln2"
    assert set(found) == {"D010"}, found
    assert f"B (burn)'s output is blocks.1.ln2 of {read}" in found["D010"].evidence, found["D010"].evidence
    assert f"where A's blocks.1.ln2 reads {reads}" in found["D010"].evidence, found["D010"].evidence
    assert fix in found["D010"].fix, found["D010"].fix


# 3. a training trace: the same measure at the step's first divergence


def test_a_training_port_s_missing_activation_is_named_at_step_0(tmp_path):
    def run(act, path):
        torch.manual_seed(0)
        model = Mlp(act)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(2)
        batches = [{"x": torch.randn(5, 6), "y": torch.randint(0, 4, (5,))} for _ in range(2)]
        return record(model, optimizer, batches, path, steps=2)

    a = run(F.gelu, tmp_path / "a.safetensors")
    b = as_burn(run(lambda x: x, tmp_path / "b.safetensors"))
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    found = {d.rule: d for d in diagnose(comparison)}
    assert comparison.first_divergence.name == "step0.activations.fc2"
    assert "B (burn)'s output is fc2 of `fc1`" in found["D010"].evidence, found
    assert "apply a GELU (erf form) to fc1 before fc2" in found["D010"].fix


# 4. what it does not claim


def test_an_input_no_candidate_reproduces_gets_the_generic_d010(tmp_path):
    """fc1's output halved before the GELU: no activation of a recorded tensor gives it, and nothing is named."""
    torch.manual_seed(0)
    model = Mlp()
    comparison, found = _found(tmp_path, model, _port(model, act=lambda x: F.gelu(0.5 * x)), 5, 6)
    reads = comparison.evidence.reads
    assert reads is not None and reads.b is None and reads.a.shown() == "gelu(fc1)"
    assert "computes something else between fc1 and fc2" in found["D010"].evidence
    assert "computes as PyTorch's does on another input" not in found["D010"].evidence


def _faithful(tmp_path, model: nn.Module, *shape: int):
    """A's trace of ``model`` and a correct port's: a float64 copy, its tensors rounded to float32."""
    torch.manual_seed(1)
    batches = [{"x": torch.randn(*shape)}]
    a = open_trace(torch_side(model, batches, tmp_path / "a.safetensors"))
    return a, open_trace(burn_side(copy.deepcopy(model), batches, tmp_path / "b.safetensors", float64=True))


def test_a_correct_port_reads_nothing(tmp_path):
    """A float64 port of the block: rounding apart everywhere, no diagnosis, and no layer re-run at its end."""
    torch.manual_seed(0)
    a, b = _faithful(tmp_path, Blocks(), 2, 5, 8)
    for module in ("blocks.0.attn", "blocks.1.ln2", "blocks.1.mlp"):
        assert measure_reads(a, b, f"step0.activations.{module}") is None, module  # B's layer of A's input is B's
    comparison = compare_with_evidence(a, b)
    assert not diagnose(comparison) and comparison.evidence.reads is None


# 5. a hand-written attention between its projections


class Attention(nn.Module):
    """nanoGPT's packed `c_attn` or BERT's `query`/`key`/`value`, the attention by hand, then `c_proj`; ``how``
    builds one slip in."""

    def __init__(self, packed: bool = True, causal: bool = True, how: str = "faithful") -> None:
        super().__init__()
        if packed:
            self.c_attn = nn.Linear(32, 96)
        else:
            self.query, self.key, self.value = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)
        self.c_proj = nn.Linear(32, 32)
        self.packed, self.causal, self.how, self.heads = packed, causal, how, 4

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2) if self.packed else (self.query(x), self.key(x), self.value(x))
        if self.how == "qkv-order":
            q, k = k, q
        heads = 8 if self.how == "heads" else self.heads
        q, k, v = (m.view(b, t, heads, c // heads).transpose(1, 2) for m in (q, k, v))
        scores = q @ k.transpose(-2, -1) * (c ** -0.5 if self.how == "scale-dmodel" else (c // heads) ** -0.5)
        if self.causal and self.how != "no-mask":
            scores = scores.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf"))
        weights = scores.softmax(dim=-2 if self.how == "softmax-dim" else -1)
        return self.c_proj((weights @ v).transpose(1, 2).reshape(b, t, c))


ATTENTION = [
    ("scale-dmodel", "scale 1/sqrt(32)", "scale the attention scores by 1/sqrt(head_dim) = 1/sqrt(8)"),
    ("no-mask", "no mask", "mask the attention scores causally before the softmax"),
    ("qkv-order", "k q v in that order", "take q, k and v from the packed c_attn in PyTorch's order (q k v)"),
    ("softmax-dim", "softmax over the queries", "take the softmax of the scores over the keys"),
    ("heads", "8 heads", "split the attention into 4 heads of 8"),
]


@pytest.mark.parametrize(("how", "read", "fix"), ATTENTION, ids=[c[0] for c in ATTENTION])
def test_an_attention_slip_is_named_at_its_output_projection(tmp_path, how, read, fix):
    torch.manual_seed(0)
    model = Attention()
    comparison, found = _found(tmp_path, model, _port(model, how=how), 2, 6, 32)
    assert comparison.first_divergence.name == "step0.activations.c_proj"
    assert set(found) == {"D010"}, found
    evidence = found["D010"].evidence
    assert "B (burn)'s output is c_proj of `attention of c_attn (" in evidence and read in evidence, evidence
    assert ("where A's c_proj reads `attention of c_attn (4 heads, scale 1/sqrt(8), causal mask, q k v in that "
            "order, softmax over the keys)`") in evidence, evidence
    assert fix in found["D010"].fix, found["D010"].fix


def test_an_attention_of_separate_query_key_value_is_re_run_too(tmp_path):
    """BERT's layout, no mask: the scale slip is named from the three projections' outputs."""
    torch.manual_seed(0)
    model = Attention(packed=False, causal=False)
    _, found = _found(tmp_path, model, _port(model, how="scale-dmodel"), 2, 6, 32)
    evidence = found["D010"].evidence
    assert "c_proj of `attention of query, key, value (4 heads, scale 1/sqrt(32), no mask" in evidence, evidence
    assert "scale the attention scores by 1/sqrt(head_dim) = 1/sqrt(8)" in found["D010"].fix


def test_a_faithful_attention_reads_nothing(tmp_path):
    torch.manual_seed(0)
    a, b = _faithful(tmp_path, Attention(), 2, 6, 32)
    assert measure_reads(a, b, "step0.activations.c_proj") is None
    assert not diagnose(compare_with_evidence(a, b))


class PaddedAttention(Attention):
    """BERT's layout, the keys masked by the batch's `key_padding_mask` (True at padding, `nn.Transformer`'s
    convention); ``how="no-mask"`` leaves it out."""

    def __init__(self, how: str = "faithful") -> None:
        super().__init__(packed=False, causal=False, how=how)

    def forward(self, x, key_padding_mask):
        b, t, c = x.shape
        q, k, v = (m(x).view(b, t, self.heads, c // self.heads).transpose(1, 2) for m in (self.query, self.key,
                                                                                       self.value))
        scores = q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5
        if self.how != "no-mask":
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        return self.c_proj((scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c))


def test_a_padding_mask_true_at_padding_left_out_is_named_at_the_output_projection(tmp_path):
    torch.manual_seed(0)
    model = PaddedAttention()
    torch.manual_seed(1)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[1, 4:] = True
    batches = [{"x": torch.randn(2, 6, 32), "key_padding_mask": mask}]
    a = torch_side(model, batches, tmp_path / "a.safetensors")
    b = burn_side(_port(model, how="no-mask"), batches, tmp_path / "b.safetensors")
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    found = {d.rule: d for d in diagnose(comparison)}
    assert comparison.first_divergence.name == "step0.activations.c_proj"
    assert set(found) == {"D010"}, found
    evidence = found["D010"].evidence
    assert "c_proj of `attention of query, key, value (4 heads, scale 1/sqrt(8), no mask" in evidence, evidence
    assert "where A's c_proj reads `attention of query, key, value (4 heads, scale 1/sqrt(8), padding mask " \
           "(key_padding_mask 1 masked)" in evidence, evidence
    assert "`let padding = key_padding_mask.equal_elem(1);`" in found["D010"].fix, found["D010"].fix


# 3. a concatenation in the other order


class TimeEmbedding(nn.Module):
    """A diffusion model's sinusoidal timestep embedding, cat([sin, cos]) (``swapped``: cat([cos, sin]), a port's
    slip), then a Linear: nothing records the embedding but the Linear's input."""

    def __init__(self, swapped: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.swapped = swapped

    def forward(self, x):
        args = x[..., :1] * torch.exp(-torch.arange(4) * 2.3)
        parts = [torch.cos(args), torch.sin(args)] if self.swapped else [torch.sin(args), torch.cos(args)]
        return self.fc(torch.cat(parts, dim=-1))


class SkipConcat(nn.Module):
    """A UNet's skip connection: conv2 reads cat([up, skip]) over the channels (``swapped``: cat([skip, up]))."""

    def __init__(self, swapped: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 5, 3, padding=1)
        self.swapped = swapped

    def forward(self, x):
        skip = torch.relu(self.conv1(x))
        up = self.up(skip)
        return self.conv2(torch.cat([skip, up] if self.swapped else [up, skip], dim=1))


@pytest.mark.parametrize(("model", "shape", "module", "what"),
                         [(TimeEmbedding, (5, 3), "fc", "features"), (SkipConcat, (2, 3, 6, 6), "conv2", "channels")],
                         ids=["sin-cos", "skip-order"])
def test_a_concatenation_in_the_other_order_is_named(tmp_path, model, shape, module, what):
    """Each had the generic D010 ("computes something else from the inputs up to fc"); B's layer reads A's recorded
    input with its two halves swapped, which names the order to restore."""
    torch.manual_seed(0)
    ours = model()
    theirs = model(swapped=True)
    theirs.load_state_dict(ours.state_dict())
    comparison, found = _found(tmp_path, ours, theirs, *shape)
    assert comparison.first_divergence.name == f"step0.activations.{module}"
    assert f"{module}'s input with its two halves in the other order" in found["D010"].evidence, found["D010"].evidence
    assert f"the two halves of its {what} swapped" in found["D010"].fix, found["D010"].fix
    assert "`Tensor::cat(vec![...], dim)` in PyTorch's order" in found["D010"].fix
    # the faithful port reads nothing of the kind
    faithful = model()
    faithful.load_state_dict(ours.state_dict())
    comparison, found = _found(tmp_path, ours, faithful, *shape)
    assert comparison.passed and not found


class Classifier(nn.Module):
    """A sequence classifier's head on the class token (``read``: the port's reduction of the tokens instead)."""

    def __init__(self, read: str = "first") -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)
        self.read = read

    def forward(self, x):
        h = self.encoder(x)
        return self.head({"first": h[:, 0], "mean": h.mean(dim=1), "last": h[:, -1]}[self.read])


@pytest.mark.parametrize("theirs", ["mean", "last"])
def test_a_head_reading_the_tokens_otherwise_is_named(tmp_path, theirs):
    """A ViT port reading the mean of the tokens where torchvision reads the class token had D010's generic "between
    encoder and heads.head"; the head's input is found as a reduction of the encoder's recorded tokens on each side."""
    torch.manual_seed(0)
    ours = Classifier()
    port = Classifier(read=theirs)
    port.load_state_dict(ours.state_dict())
    comparison, found = _found(tmp_path, ours, port, 4, 5, 8)
    assert comparison.first_divergence.name == "step0.activations.head"
    said = {"mean": "encoder's mean over the tokens", "last": "encoder's last token"}[theirs]
    assert f"head of `{said}`" in found["D010"].evidence, found["D010"].evidence
    assert "feed head encoder's first token as the PyTorch forward does" in found["D010"].fix, found["D010"].fix


# 4. an attention of PyTorch's own with another number of heads


class Encoded(nn.Module):
    """A ViT-style block in small: nn.MultiheadAttention (batch-first) or a whole nn.TransformerEncoderLayer."""

    def __init__(self, layer: bool, heads: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 8)
        self.block = nn.TransformerEncoderLayer(8, heads, 16, dropout=0.0, batch_first=True) if layer else \
            nn.MultiheadAttention(8, heads, batch_first=True)
        self.layer = layer
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = self.embed(x)
        h = self.block(h) if self.layer else self.block(h, h, h, need_weights=False)[0]
        return self.head(h)


@pytest.mark.parametrize("layer", [False, True], ids=["MultiheadAttention", "TransformerEncoderLayer"])
def test_an_attention_with_another_number_of_heads_is_named(tmp_path, layer):
    """A ViT port built with 8 heads where torchvision's has 4 (the same weights load: nothing fails) had D010's
    generic text with notes of burn's defaults; re-run with A's masks, B's output is the attention of 4 heads."""
    torch.manual_seed(0)
    ours = Encoded(layer)
    port = Encoded(layer, heads=4)
    port.load_state_dict(ours.state_dict())
    comparison, found = _found(tmp_path, ours, port, 3, 5, 6)
    assert comparison.first_divergence.name.startswith("step0.activations.block"), comparison.first_divergence.name
    assert "splits the width into 4 heads where PyTorch's has 2 (`num_heads`)" in found["D010"].evidence, \
        found["D010"].evidence
    assert "`MultiHeadAttentionConfig::new(d_model, 2)`" in found["D010"].fix

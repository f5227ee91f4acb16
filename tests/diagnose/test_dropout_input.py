"""What D013 takes for a dropout, on real PyTorch passes: a dropout's output that differs is a dropout only when
the numbers show one. A function between the tap before a dropout and the dropout (a functional ReLU ported as
GELU) is the code between them (D010), in a forward trace and a training one; an attention whose dropout no tap
shows, on a side whose trace says mode autodiff, is D013 when a tapped dropout's mask is measured on that side's
own tensors, and D010 when no tapped dropout is on."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.trace import open_trace, write_trace
from tests.diagnose.forward_traces import BurnDropout, burn_side, torch_side


class FeedForward(nn.Module):
    """PyTorch's TransformerEncoderLayer feed-forward: the activation is a function, no module to tap."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 32)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(32, 3)
        self.act = F.relu

    def forward(self, x):
        return self.head(self.drop(self.act(self.fc(x))))


def _batches(*shape: int, n: int = 2) -> list[dict[str, torch.Tensor]]:
    torch.manual_seed(1)
    return [{"x": torch.randn(*shape)} for _ in range(n)]


def _diagnose(a, b):
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    return comparison, diagnose(comparison)


def test_a_function_before_a_dropout_in_a_forward_trace_is_the_code_between(tmp_path):
    torch.manual_seed(0)
    model = FeedForward().eval()
    port = copy.deepcopy(model)
    port.act = F.gelu
    a = torch_side(model, _batches(64, 6), tmp_path / "a.safetensors")
    b = burn_side(port, _batches(64, 6), tmp_path / "b.safetensors")
    comparison, found = _diagnose(a, b)
    assert comparison.first_divergence.name == "step0.activations.drop"
    fed = comparison.evidence.dropout_input
    assert (fed.input, fed.before, fed.input_is_before) == \
        ("step0.layer_inputs.drop", "step0.activations.fc", False)
    assert comparison.evidence.dropout is None
    assert [d.rule for d in found][:1] == ["D010"], found
    assert "D013" not in [d.rule for d in found]
    assert "drop does not read fc's output: A recorded its input (step0.layer_inputs.drop)" in found[0].evidence
    assert "between fc and drop" in found[0].evidence


def test_a_function_before_a_dropout_in_a_training_trace_is_the_code_between(tmp_path):
    """Both sides recorded with dropout off (record's default), the port's activation GELU, its trace a burn
    port's (no layer inputs): the dropout's recorded input is not fc's output, so fc agreeing is no mask."""
    from burnside.torch import record

    paths = []
    for side in ("a", "b"):
        torch.manual_seed(0)
        model = FeedForward()
        if side == "b":
            model.act = F.gelu
        batch = {"x": torch.randn(64, 6), "y": torch.randint(0, 3, (64,))}
        paths.append(record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, tmp_path / f"{side}.json"))
    port = open_trace(paths[1])
    tensors = {n: np.array(port.array(n)) for n in port.names if ".layer_inputs." not in n}
    metadata = {k: v for k, v in port.metadata.items() if k not in ("modules", "layer_inputs")} | {"framework": "burn"}
    paths[1].unlink()
    write_trace(paths[1], tensors, metadata)
    comparison, found = _diagnose(*paths)
    assert comparison.first_divergence.name == "step0.activations.drop"
    assert comparison.evidence.dropout_input.input_is_before is False
    assert "D013" not in [d.rule for d in found], found
    assert found[0].rule == "D010" and "between fc and drop" in found[0].evidence, found


class Attending(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Linear(6, 16)
        self.attn = nn.MultiheadAttention(16, 2, dropout=0.1, batch_first=True)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h = self.emb(x)
        return self.head(h + self.drop(self.attn(h, h, h, need_weights=False)[0]))


class BurnAttention(nn.MultiheadAttention):
    """burn's MultiHeadAttention on an autodiff device: its attention dropout (``p``) on, or a causal mask
    where PyTorch's model has none (``causal``)."""

    def __init__(self, mha: nn.MultiheadAttention, p: float, causal: bool = False) -> None:
        super().__init__(mha.embed_dim, mha.num_heads, batch_first=True)
        self.load_state_dict(mha.state_dict())
        self.p, self.causal = p, causal

    def forward(self, q, k, v, need_weights=False):
        mask = torch.triu(torch.ones(q.shape[1], q.shape[1], dtype=torch.bool), 1) if self.causal else None
        out = F.multi_head_attention_forward(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), self.embed_dim, self.num_heads,
            self.in_proj_weight, self.in_proj_bias, None, None, False, self.p, self.out_proj.weight,
            self.out_proj.bias, training=self.p > 0, need_weights=False, attn_mask=mask)[0]
        return out.transpose(0, 1), None


@pytest.mark.parametrize("seed", [0, 1])
def test_an_untapped_attention_dropout_on_an_autodiff_device_is_named_by_the_tapped_one(tmp_path, seed):
    torch.manual_seed(seed)
    model = Attending().eval()
    port = copy.deepcopy(model)
    port.attn = BurnAttention(model.attn, 0.1)
    port.drop = BurnDropout(0.1)
    a = torch_side(model, _batches(8, 10, 6), tmp_path / "a.safetensors")
    b = burn_side(port, _batches(8, 10, 6), tmp_path / "b.safetensors", mode="autodiff", eval=False)
    comparison, found = _diagnose(a, b)
    assert comparison.first_divergence.name == "step0.activations.attn"
    measured = comparison.evidence.dropout
    assert (measured.side, measured.module, measured.at, measured.source) == \
        ("b", "attn", "step0.activations.drop", "step0.activations.attn")
    assert measured.p == pytest.approx(0.1, rel=1e-4)
    assert found[0].rule == "D013", found
    assert "B (burn)'s trace says mode autodiff" in found[0].evidence
    assert "1/(1 - p) for p = 0.1: a dropout is active at inference on B (burn)" in found[0].evidence
    assert "`Device::default()`" in found[0].fix and "with_dropout(0.0)" in found[0].fix


def test_an_attention_that_computes_otherwise_on_an_autodiff_device_is_no_dropout(tmp_path):
    """Mode autodiff, the port's dropouts off (burn's `model.valid()`), its attention causal: no mask is
    measured anywhere, and D010 names the attention."""
    torch.manual_seed(0)
    model = Attending().eval()
    port = copy.deepcopy(model)
    port.attn = BurnAttention(model.attn, 0.0, causal=True)
    a = torch_side(model, _batches(8, 10, 6), tmp_path / "a.safetensors")
    b = burn_side(port, _batches(8, 10, 6), tmp_path / "b.safetensors", mode="autodiff")
    comparison, found = _diagnose(a, b)
    assert comparison.first_divergence.name == "step0.activations.attn"
    assert comparison.evidence.dropout is None
    assert found[0].rule == "D010" and "D013" not in [d.rule for d in found], found

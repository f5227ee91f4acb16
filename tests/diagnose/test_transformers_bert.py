"""Hugging Face's `BertModel` (transformers, as installed) against a port with one slip, on real forward passes:
the feed-forward's activation of another form (`ACT2FN`'s classes), the padding mask left out of the attention,
the position embedding looked up at other ids.

Side A is `record_forward`'s trace of the model; side B is the same model with the slip built in (another
activation module, the forward called otherwise), written as a burn port's trace (no layer inputs, no module
classes). Before this each got D010's generic "computes something else between ... and ...".
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
activations = pytest.importorskip("transformers.activations")

from burnside.diagnose import diagnose  # noqa: E402
from burnside.pipeline import compare_with_evidence  # noqa: E402
from burnside.trace import open_trace, write_trace  # noqa: E402
from tests.diagnose.forward_traces import burn_side, torch_side  # noqa: E402

SEQ = 12


def bert(hidden_act: str = "gelu") -> torch.nn.Module:
    """A small BERT (hidden 32, 2 layers, 2 heads), its weights those of a trained model's size (record.py's of the
    third-party BERT crate)."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
                                     layer_norm_eps=1e-12, hidden_act=hidden_act)
    model = transformers.BertModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.2, 0.2)
            elif "embeddings" in name:
                p.normal_(0.0, 0.5)
            elif name.endswith("weight"):
                p.normal_(0.0, 0.15)
            else:
                p.normal_(0.0, 0.05)
    return model.eval()


def batches(count: int = 1) -> list[dict[str, torch.Tensor]]:
    """Sentence pairs of 12 tokens, the second row padded by 4 (attention_mask 0, id 0)."""
    torch.manual_seed(1)
    found = []
    for _ in range(count):
        input_ids = torch.randint(1, 100, (3, SEQ))
        token_type_ids = torch.zeros(3, SEQ, dtype=torch.long)
        token_type_ids[:, SEQ // 2:] = 1
        attention_mask = torch.ones(3, SEQ, dtype=torch.long)
        attention_mask[1, SEQ - 4:] = 0
        input_ids[1, SEQ - 4:] = 0
        found.append({"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask})
    return found


def compare(tmp_path, model, port, forward=None, float64: bool = False):
    a = torch_side(model, batches(), tmp_path / "a.safetensors")
    b = burn_side(port, batches(), tmp_path / "b.safetensors", forward=forward, float64=float64)
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    return comparison, diagnose(comparison)


def with_activation(model, cls) -> torch.nn.Module:
    port = copy.deepcopy(model)
    for layer in port.encoder.layer:
        layer.intermediate.intermediate_act_fn = cls()
    return port


# 1. the feed-forward's activation: Hugging Face's classes measured as torch's GELU is

ACTS = [
    # (A's hidden_act, B's class, A's class, what A computes, what B does, words of the fix)
    ("gelu", "GELUTanh", "GELUActivation", "the exact erf form", "the tanh approximation",
     "`burn::tensor::activation::gelu` (or `burn::nn::Gelu::new()`), not `burn::tensor::activation::gelu_approximate`"),
    ("gelu", "NewGELUActivation", "GELUActivation", "the exact erf form", "the tanh approximation",
     "`burn::tensor::activation::gelu`"),
    ("gelu_new", "GELUActivation", "NewGELUActivation", "the tanh approximation", "the exact erf form",
     "`burn::tensor::activation::gelu_approximate` (or `burn::nn::Gelu::new_approximate()`)"),
    ("gelu_fast", "GELUActivation", "FastGELUActivation", "the tanh approximation", "the exact erf form",
     "`hidden_act: \"gelu_fast\"`"),
    ("quick_gelu", "GELUActivation", "QuickGELUActivation", "the quick GELU x sigmoid(1.702 x)",
     "the exact erf form of GELU", "burn::tensor::activation::sigmoid(x.mul_scalar(1.702))"),
    ("silu", "GELUActivation", "SiLUActivation", "SiLU, x sigmoid(x), not a GELU", "the exact erf form of GELU",
     "`burn::tensor::activation::silu`"),
]


@pytest.mark.parametrize(("act", "port_cls", "kind", "ours", "theirs", "fix"), ACTS,
                         ids=[f"{c[0]}-as-{c[1]}" for c in ACTS])
def test_a_hugging_face_activation_of_another_form_is_named(tmp_path, act, port_cls, kind, ours, theirs, fix):
    model = bert(act)
    comparison, found = compare(tmp_path, model, with_activation(model, getattr(activations, port_cls)))
    module = "encoder.layer.0.intermediate.intermediate_act_fn"
    assert comparison.first_divergence.name == f"step0.activations.{module}"
    assert [d.rule for d in found][:1] == ["D011"], found
    evidence = found[0].evidence
    assert evidence.startswith(f"{module} ({kind}) at batch 0: A (pytorch) computes {ours}"), evidence
    assert f"B (burn) {theirs}" in evidence, evidence
    assert fix in found[0].fix, found[0].fix
    assert not [d for d in found if d.rule == "D010"], found


def test_a_faithful_bert_port_gets_no_diagnosis(tmp_path):
    """A float64 copy of the model, its tensors rounded to float32: rounding apart everywhere, nothing named."""
    model = bert()
    comparison, found = compare(tmp_path, model, copy.deepcopy(model), float64=True)
    assert not found, found
    assert comparison.evidence.reads is None


# 2. the attention's padding mask: at the self-attention module, whose output is its context


def without_mask(model, batch):
    return model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])


def inverted_mask(model, batch):
    return model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                 attention_mask=1 - batch["attention_mask"])


MASK_SLIPS = [
    # (B's forward, what B's attention has, words of the fix)
    (without_mask, "no mask where A's has padding mask (attention_mask 0 masked)",
     "`let padding = attention_mask.equal_elem(0);`"),
    (inverted_mask, "padding mask (attention_mask 1 masked) where A's has padding mask (attention_mask 0 masked)",
     "`attention_mask.equal_elem(0)`, not `attention_mask.equal_elem(1)`"),
]


@pytest.mark.parametrize(("forward", "apart", "fix"), MASK_SLIPS, ids=["mask-left-out", "mask-inverted"])
def test_the_padding_mask_left_out_or_inverted_is_named_at_the_self_attention(tmp_path, forward, apart, fix):
    model = bert()
    comparison, found = compare(tmp_path, model, copy.deepcopy(model), forward=forward)
    module = "encoder.layer.0.attention.self"
    assert comparison.first_divergence.name == f"step0.activations.{module}"
    assert [d.rule for d in found] == ["D010"], found
    evidence = found[0].evidence
    assert f"B (burn)'s {module} (BertSelfAttention) attends to the same query, key, value otherwise" in evidence
    assert apart in evidence, evidence
    assert fix in found[0].fix, found[0].fix
    assert comparison.evidence.reads.direct


def test_a_causal_mask_added_is_named(tmp_path):
    """The port builds BERT as a decoder (`is_decoder`): causal and padding masks where BERT's has the padding one."""
    model = bert()
    port = copy.deepcopy(model)
    port.config.is_decoder = True
    comparison, found = compare(tmp_path, model, port, forward=lambda m, batch: dict(m(**batch, use_cache=False)))
    assert [d.rule for d in found] == ["D010"], found
    assert ("padding mask (attention_mask 0 masked) and causal mask where A's has padding mask (attention_mask 0 "
            "masked)") in found[0].evidence, found[0].evidence
    assert "B masks the scores causally where PyTorch does not" in found[0].fix


def test_the_mask_left_out_is_named_at_the_output_projection_when_the_context_is_not_recorded(tmp_path):
    """A port whose trace has no `attention.self` (its taps at the projections only): the output projection re-run
    on the attention of the recorded query, key and value."""
    model = bert()
    a = torch_side(model, batches(), tmp_path / "a.safetensors")
    b = burn_side(copy.deepcopy(model), batches(), tmp_path / "b.safetensors", forward=without_mask)
    trace = open_trace(b)
    kept = {n: np.array(trace.array(n)) for n in trace.names if not n.endswith(".attention.self")}
    order = [m for m in trace.metadata["activations"] if not m.endswith(".attention.self")]
    write_trace(b, kept, trace.metadata | {"activations": order})
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    found = diagnose(comparison)
    assert comparison.first_divergence.name == "step0.activations.encoder.layer.0.attention.output.dense"
    assert [d.rule for d in found] == ["D010"], found
    assert ("B (burn)'s output is encoder.layer.0.attention.output.dense of `attention of "
            "encoder.layer.0.attention.self.query, encoder.layer.0.attention.self.key, "
            "encoder.layer.0.attention.self.value (2 heads, scale 1/sqrt(16), no mask") in found[0].evidence
    assert "`let padding = attention_mask.equal_elem(0);`" in found[0].fix


# 3. an embedding fed other ids: read back from its output's rows, each a row of the weight


def with_positions(make):
    def forward(model, batch):
        return model(**batch, position_ids=make(batch))
    return forward


LOOKUPS = [
    # (B's forward, the module, what the finding says, words of the fix)
    (with_positions(lambda batch: torch.arange(1, SEQ + 1)[None]), "embeddings.position_embeddings",
     "B (burn) looks up positions 1..12 where A's looks up 0..11 (offset +1)",
     "count the positions from 0 as the PyTorch forward does, not from 1: embeddings.position_embeddings's ids are "
     "`Tensor::<1, Int>::arange(0..seq as i64, &device)`"),
    (with_positions(lambda batch: batch["token_type_ids"][:1]), "embeddings.position_embeddings",
     "B (burn) looks up positions [0, 0, 0, 0, 0, 0, 1, 1, ...] where A's looks up 0..11 (B (burn)'s are the "
     "batch's `token_type_ids`)",
     "feed embeddings.position_embeddings the position ids 0..11, `Tensor::<1, Int>::arange(0..seq as i64, &device)`"),
    (with_positions(lambda batch: torch.arange(SEQ).clamp(max=8)[None]), "embeddings.position_embeddings",
     "B (burn) looks up positions [0, 1, 2, 3, 4, 5, 6, 7, ...] where A's looks up 0..11 (A's clipped at 8)",
     "feed embeddings.position_embeddings the ids unclipped, as the PyTorch forward does: B (burn) clamps them at 8"),
    (lambda model, batch: model(**(batch | {"input_ids": batch["input_ids"].clamp(max=50)})),
     "embeddings.word_embeddings", "(A's clipped at 50)",
     "feed embeddings.word_embeddings the ids unclipped, as the PyTorch forward does: B (burn) clamps them at 50"),
]


@pytest.mark.parametrize(("forward", "module", "said", "fix"), LOOKUPS,
                         ids=["positions-from-1", "token-types-as-positions", "positions-clipped", "ids-clipped"])
def test_an_embedding_fed_other_ids_is_named_with_the_ids_each_side_looked_up(tmp_path, forward, module, said, fix):
    model = bert()
    comparison, found = compare(tmp_path, model, copy.deepcopy(model), forward=forward)
    assert comparison.first_divergence.name == f"step0.activations.{module}"
    assert [d.rule for d in found] == ["D010"], found
    evidence = found[0].evidence
    assert f"B (burn)'s {module} (Embedding) looks up other rows of the same weight" in evidence, evidence
    assert said in evidence, evidence
    assert fix in found[0].fix, found[0].fix
    # burn's Embedding's known differences: not what this lookup shows
    assert "burn's twin of Embedding" not in found[0].fix

"""`record_generate`: a language model's greedy decode loop with its cache, recorded as a forward trace of one
batch per step (the prompt, then each chosen token at its position), on a tiny transformers LlamaForCausalLM.

The comparison places a decode-loop slip at the step and layer where it shows: side B is the same model run by a
decode step with a slip built in (a cache-carrying port's), marked burn. Positions restarted at 0 under the cache
part at step 1's rotary table, not in the prompt; a cache not carried between steps (each token attending to itself
alone) at step 1's first attention's output projection. The faithful loop recorded twice is bit-identical and OK,
and the float64 reference is
recorded beside it with its own cache.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.pipeline import compare_with_evidence
from burnside.report.table import generation_line
from burnside.recording.generate import hf_step
from burnside.recording.reference import record_generate_reference
from burnside.torch import record_generate
from burnside.trace import open_trace
from tests.diagnose.forward_traces import as_burn

transformers = pytest.importorskip("transformers")

STEPS = 4


def tiny_llama():
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


PROMPT = torch.tensor([[5, 17, 42, 3, 9, 30, 11, 2]])


def restarted_positions(model, input_ids, position_ids, cache):
    """A port's decode step that counts each step's positions from 0 under the cache."""
    if cache is None:
        cache = transformers.DynamicCache()
    positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
    return hf_step(model, input_ids, positions, cache)


def no_cache(model, input_ids, position_ids, cache):
    """A port's decode step that drops the cache: each new token attends to itself alone."""
    return model(input_ids=input_ids, position_ids=position_ids, use_cache=False).logits, None


def test_the_loop_is_recorded_one_batch_per_step_with_its_reference(tmp_path):
    model = tiny_llama()
    path = record_generate(model, PROMPT, tmp_path / "a.safetensors", steps=STEPS,
                           reference=tmp_path / "a.reference.safetensors")
    trace = open_trace(path)
    generation = trace.metadata["generation"]
    assert generation["prompt"] == 8 and generation["steps"] == STEPS and len(generation["tokens"]) == STEPS + 1
    assert trace.steps == STEPS + 1
    assert trace.info("step0.inputs.input_ids").shape == (1, 8)
    for k in range(1, STEPS + 1):
        # each decode step feeds the token the step before chose, at the next position
        assert trace.array(f"step{k}.inputs.input_ids").tolist() == [[generation["tokens"][k - 1]]]
        assert trace.array(f"step{k}.inputs.position_ids").tolist() == [[8 + k - 1]]
        assert trace.info(f"step{k}.outputs.output").shape == (1, 1, 64)
    # the recorded logits choose the recorded tokens
    assert int(trace.array("step0.outputs.output")[0, -1].argmax()) == generation["tokens"][0]
    again = record_generate(model, PROMPT, tmp_path / "b.safetensors", steps=STEPS)
    comparison = compare_with_evidence(path, as_burn(again), reference=tmp_path / "a.reference.safetensors")
    assert comparison.passed, [r.name for r in comparison.failed_rows]
    assert all(r.stats.identical for r in comparison.rows), [r.name for r in comparison.rows if not r.stats.identical]
    assert generation_line(comparison)[0].endswith("B chooses A's token at every step")
    # the reference on its own (a large model's trace and reference each recorded by a process of its own): the
    # same file
    alone = open_trace(record_generate_reference(model, PROMPT, tmp_path / "alone.safetensors", steps=STEPS))
    reference = open_trace(tmp_path / "a.reference.safetensors")
    assert alone.names == reference.names and alone.metadata["generation"] == generation
    for name in alone.names:
        assert np.array_equal(alone.values(name), reference.values(name)), name


def test_the_reference_leaves_the_model_as_it_was(tmp_path):
    """The float64 run widens the model in place (no copy beside it) and puts every tensor back bit for bit: the
    tied lm_head stays tied, the dtypes and the parameters' identities are the model's, an RMSNorm's eps=None is
    None again."""
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    model.extra_norm = torch.nn.RMSNorm(32)  # eps None: pinned to float32's for the float64 run
    before = {name: (t, t.detach().clone()) for name, t in [*model.named_parameters(), *model.named_buffers()]}
    record_generate_reference(model, PROMPT, tmp_path / "r.safetensors", steps=2)
    after = dict([*model.named_parameters(), *model.named_buffers()])
    assert after.keys() == before.keys()
    for name, (tensor, values) in before.items():
        assert after[name] is tensor and tensor.dtype == values.dtype and torch.equal(tensor, values), name
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.extra_norm.eps is None
    assert open_trace(tmp_path / "r.safetensors").info("step0.params_before.model.norm.weight").dtype == "F64"


@pytest.mark.parametrize(("slip", "module"), [(restarted_positions, "model.rotary_emb"),
                                              (no_cache, "model.layers.0.self_attn.o_proj")],
                         ids=["restarted-positions", "no-cache"])
def test_a_decode_step_slip_parts_at_the_first_decode_step(tmp_path, slip, module):
    model = tiny_llama()
    a = record_generate(model, PROMPT, tmp_path / "a.safetensors", steps=STEPS,
                        reference=tmp_path / "a.reference.safetensors")
    # the port is fed PyTorch's tokens: its batches are A's, its decode step its own
    tokens = open_trace(a).metadata["generation"]["tokens"]
    b = record_generate(model, PROMPT, tmp_path / "b.safetensors", steps=STEPS, step=slip)
    assert open_trace(b).metadata["generation"]["tokens"][0] == tokens[0]  # the prefill is the same
    comparison = compare_with_evidence(a, as_burn(b), reference=tmp_path / "a.reference.safetensors")
    assert not comparison.passed
    first = comparison.first_divergence
    assert first is not None and first.name.startswith("step1."), first
    # the prompt's step agrees bit for bit; the first decode step parts where the slip is: the rotary table of the
    # positions, or the first attention
    assert all(r.passed for r in comparison.rows if r.name.startswith("step0.")), \
        [r.name for r in comparison.failed_rows if r.name.startswith("step0.")]
    assert first.name == f"step1.activations.{module}", first.name
    # the decode loop's line: the logits' error per step, and where B's chosen token would part
    text, _ = generation_line(comparison)
    assert text.startswith(f"generation, teacher-forced over {STEPS + 1} steps"), text
    assert "B chooses A's token at every step" in text or "B would choose another token from step " in text, text
    assert "from step 0 on" not in text, text
    if slip is restarted_positions:
        # the rotary table's rows read back as positions: B's restart at 0 where PyTorch's are the cache's length
        found = {d.rule: d for d in diagnose(comparison)}
        assert "computes the table of positions [0] where PyTorch's is of positions [8]" in found["D010"].evidence, \
            found
        assert "count the positions of a step after the cache from the cache's length" in found["D010"].fix


def test_a_prompt_that_is_not_token_ids_is_refused_in_one_line(tmp_path):
    with pytest.raises(BurnsideError, match=r"prompt_ids must be integer token ids of shape \[1, prompt length\]"):
        record_generate(tiny_llama(), torch.randn(1, 8), tmp_path / "a.safetensors")
    with pytest.raises(BurnsideError, match="steps must be a positive integer"):
        record_generate(tiny_llama(), PROMPT, tmp_path / "a.safetensors", steps=0)


def test_rope_scaling_left_out_is_named_from_the_rotary_table(tmp_path):
    """A llama3-scaled RoPE (its lowest frequencies divided by the factor) against a port computing theta^(-2i/d)
    alone: the rotary table fitted on the prompt's positions names the scaling, with its factor, as the cause."""
    import numpy as np

    from burnside.trace import write_trace

    def llama(scaling: dict | None):
        config = transformers.LlamaConfig(
            vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=2048, rope_theta=500000.0, rope_scaling=scaling)
        torch.manual_seed(0)
        return transformers.LlamaForCausalLM(config).eval()

    scaled = llama({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 256})
    plain = llama(None)
    plain.load_state_dict(scaled.state_dict())
    a = record_generate(scaled, PROMPT, tmp_path / "a.safetensors", steps=2)
    b = record_generate(plain, PROMPT, tmp_path / "b.safetensors", steps=2)
    trace = open_trace(b)
    # the port as burn records it: its tensors (no rotary buffers: it computes the table inline)
    port = write_trace(tmp_path / "port.safetensors",
                       {n: np.array(trace.array(n)) for n in trace.names if not n.endswith("inv_freq")},
                       {k: v for k, v in trace.metadata.items() if k not in ("buffers", "buffers_nonpersistent")}
                       | {"framework": "burn", "framework_version": "0.22.1"})
    comparison = compare_with_evidence(a, port)
    assert not comparison.passed and comparison.first_divergence.name == "step0.activations.model.rotary_emb"
    found = {d.rule: d for d in diagnose(comparison)}
    assert "D010" in found, sorted(found)
    assert "PyTorch's is rotate_half with theta 500000 and its frequencies scaled (llama3)" in found["D010"].evidence
    assert "its lowest frequencies divided by 8" in found["D010"].fix, found["D010"].fix

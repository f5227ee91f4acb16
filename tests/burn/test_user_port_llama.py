"""A language model's generation, ported by following only the README: a tiny transformers LlamaForCausalLM (GQA,
RMSNorm, RoPE in rotate_half form, SwiGLU, theta 500000) recorded by `record_generate` (the prompt and six greedy
decode steps, one batch each) and its burn port (`user_ports/llama/`), which loads the safetensors checkpoint with
burn-store, keeps its key/value cache in the closure across `Inference` batches (made anew at batch 0), reads
PyTorch's tokens and positions, and taps every layer under PyTorch's module paths.

Graph capture cannot follow the cache past batch 0, so the run is recorded again with the taps (the faithful port
FAILed on that before). The faithful port is OK, its loop's line saying B chooses A's token at every step; each
slip FAILs at its step and layer: positions restarted under the cache, RoPE's interleaved form and another theta
named from the rotary table (D010), RMSNorm's epsilon measured on HF's LlamaRMSNorm (D011), grouped-query heads
tiled, a cache never appended and the prompt's mask at decode steps named by re-running the attention from the
recorded projections (D010).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.burn.user_port_harness import Checks, assert_named, diagnoses, project, verdict

pytest.importorskip("transformers")

llama_check = Checks("--checkpoint", "checkpoint/model.safetensors")


@pytest.fixture(scope="module")
def llama(programs, tmp_path_factory) -> Path:
    return project("llama", tmp_path_factory.mktemp("user-ports"))


def test_the_faithful_llama_generation_is_ok(llama):
    proc = llama_check(llama, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert "generation, teacher-forced over 7 steps" in proc.stdout and "B chooses A's token at every step" \
        in proc.stdout, proc.stdout


LLAMA_SLIPS = [
    ("pos-restart", "D010", ["step1.activations.model.rotary_emb", "computes the table of positions [0] where "
                             "PyTorch's is of positions [8]", "count the positions of a step after the cache"]),
    ("rms-eps", "D011", ["model.layers.0.input_layernorm (LlamaRMSNorm)", "epsilon measured 1e-6 on A (pytorch), "
                         "1e-5 on B (burn)", "RmsNormConfig::new(d_model).with_epsilon(1e-6)"]),
    # the rotary table fitted on the step's positions: its layout and theta on each side
    ("rope-interleaved", "D010", ["computes RoPE's table as interleaved with theta 500000 where PyTorch's is "
                                  "rotate_half with theta 500000", "write rotate_half by hand"]),
    ("rope-theta", "D010", ["computes RoPE's table as rotate_half with theta 10000 where PyTorch's is rotate_half "
                            "with theta 500000", "with_theta(500000.0)"]),
    # the attention re-run from each side's recorded q/k/v projections with one change at a time
    ("gqa-order", "D010", ["step0.activations.model.layers.0.self_attn.o_proj",
                           "B would choose another token from step 0 on", "the key/value heads tiled",
                           "4 query heads, 2 key/value heads of 8", "expand([b, kv, n_rep, s, d])"]),
    ("no-cache-append", "D010", ["step2.activations.model.layers.0.self_attn.o_proj",
                                 "a cache that holds the prompt's keys and values only",
                                 "DynamicCache.update"]),
    ("mask-reuse", "D010", ["step1.activations.model.layers.0.self_attn.o_proj",
                            "the prompt's causal mask at a decode step",
                            "offset the causal mask by the cache's length"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), LLAMA_SLIPS, ids=[case[0] for case in LLAMA_SLIPS])
def test_each_llama_slip_fails_at_its_step_and_layer(llama, bug, rule, words):
    assert_named(llama_check(llama, bug), rule, words)

"""A pretrained encoder's inference port, written by following only the README's "Inference ports" as a new
user writes it (`burnside new --inference`, then the model replaced on both sides): token embedding plus
learned positions, two post-norm `nn.TransformerEncoderLayer`s (d_model 32, 4 heads, feed-forward 64, ReLU,
dropout 0.1, batch first), a final LayerNorm and a Linear head, saved with `torch.save(state_dict)`.

The burn port (`user_ports/encoder/src/main.rs`) loads the `.pt` with `burnside_trace::load_pytorch_checkpoint`
(burn-store's readers; `in_proj` cut into query, key and value) into the layer written out with burn's
MultiHeadAttention, Linear, LayerNorm and ReLU, on a device without autodiff, and takes `--bug NAME` to build
one porting slip in. Each case records once, runs `burnside check` and reads the verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.burn.user_port_harness import Checks, assert_named, diagnoses, project, verdict


@pytest.fixture(scope="module")
def encoder(programs, tmp_path_factory) -> Path:
    """The project as `burnside new --inference` makes it, with its checkpoint and PyTorch side recorded once."""
    return project("encoder", tmp_path_factory.mktemp("user-ports"))


run = Checks("--checkpoint", "checkpoint/model.pt")


def test_the_faithful_encoder_is_ok_with_no_diagnosis(encoder):
    # every module of both TransformerEncoderLayers is recorded on the PyTorch side (its fused eval path
    # would skip them), and the port taps each one under PyTorch's module path
    from burnside.trace import open_trace

    meta = open_trace(encoder / "traces" / "torch.safetensors").metadata
    assert meta["kind"] == "forward" and meta["mode"] == "eval", meta
    assert "layers.1.self_attn" in meta["activations"] and "layers.0.dropout" in meta["activations"], meta
    proc = run(encoder, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith(("only in A:", "only in B:"))], proc.stdout
    assert "step1.outputs.output: relative error" in proc.stdout, proc.stdout


ENCODER_BUGS = [
    # a hand-written in_proj split that takes the key's rows for the query: named from what the port loaded
    # the final LayerNorm built with epsilon 1e-6 where PyTorch's is 1e-5: its output moves by 4.6e-6 relative,
    # inside the float64 reference's noise band (B 25x further off than A, the band 32x); the norm's epsilon,
    # measured on each side from its input, makes it a real difference
    ("ln-eps", "D011", ["norm (LayerNorm)", "epsilon measured 1e-5 on A (pytorch), 1e-6 on B (burn)",
                        "within the noise band", "its layer's settings measure apart"]),
    ("qk-swapped", "D014", ["layers.0.self_attn.in_proj_weight", "in the order k,q,v",
                            "first diverging layer per batch: batch 0 layers.0.self_attn"]),
    # ReLU ported as GELU (PyTorch's layer applies it functionally: no module to tap): the first layer that parts
    # is the feed-forward's dropout, off at inference and fed the activation, not linear1's output: the code
    # between the two taps, not a dropout mask
    ("gelu", "D010", ["first diverging layer per batch: batch 0 layers.0.dropout",
                      "A recorded its input (step0.layer_inputs.layers.0.dropout) as something computed after it",
                      "between layers.0.linear1 and layers.0.dropout"]),
    # the port on an autodiff device, where burn's dropouts (0.1, MultiHeadAttention's too) draw masks: the
    # attention's dropout has no tap, the next dropout's mask is measured on the port's own tensors
    ("dropout-on", "D013", ["first diverging layer per batch: batch 0 layers.0.self_attn",
                            "B (burn)'s trace says mode autodiff",
                            "step0.activations.layers.0.dropout1 is step0.activations.layers.0.self_attn with",
                            "1/(1 - p) for p = 0.1: a dropout is active at inference on B (burn)",
                            "`Device::default()`", "`MultiHeadAttentionConfig::with_dropout(0.0)`"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), ENCODER_BUGS, ids=[case[0] for case in ENCODER_BUGS])
def test_each_encoder_slip_fails(encoder, bug, rule, words):
    proc = run(encoder, bug)
    assert_named(proc, rule, words)


def test_the_templates_pytorch_store_load_of_a_packed_attention_is_told_the_loader_that_cuts_it(encoder):
    """The template's `load_from(PytorchStore)` kept for a model with nn.MultiheadAttention: burn-store stops on the
    packed `in_proj_weight`. The one error line keeps burn-store's head (what it could not find) and adds the loader
    that cuts the packed tensors, where burn-store's own last words suggest allow_partial(true)."""
    proc = run(encoder, "pytorch-store")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "in_proj" in proc.stderr, proc.stderr
    assert "burnside: `in_proj_" in proc.stderr and "burnside_trace::load_pytorch_checkpoint(model, path)" \
        in proc.stderr, proc.stderr


def test_a_shape_panic_inside_burn_is_compared_up_to_the_crash_and_the_shape_named(encoder):
    """One position too few: burn panics on the sum of token and position embeddings. The forward pass runs under
    graph capture, so the port writes the trace of what ran before the panic and the check compares it: FAIL, the
    crash said beside the verdict, and the first divergence is the position embedding of 15 rows where PyTorch's
    has 16 (every tensor before it agrees)."""
    proc = run(encoder, "pos-short")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "user_encoder crashed: what ran before the crash is compared below" in proc.stdout + proc.stderr
    assert "B crashed in batch 0: === Tensor Operation Error === Operation: 'Add'" in proc.stdout, proc.stdout
    assert "first divergence: step0.activations.pos (Embedding) in batch 0: its shape is [16, 32] in A, " \
        "[15, 32] in B while every tensor before it agrees" in proc.stdout, proc.stdout

"""A pretrained ViT's inference port, written by following only the README's "Inference ports" as a new user
writes it (`burnside new --inference`, then the model replaced on both sides): a patch embedding
`Conv2d(3, 64, 8, stride=8)`, a learned cls token and position embedding (`Param` fields), two pre-norm blocks with
a hand-written packed-qkv attention and an exact-GELU MLP, LayerNorms of eps 1e-6, the head on the cls token; loaded
from the `.pt` with burn-store's `PytorchStore`.

Tried as a user would, it found a false D010 on the correct port without a reference, no measure of the patch
embedding's conv, irrelevant conv notes, a renamed field not named as one, and a port tapping no layer passing a
one-LayerNorm epsilon slip with nothing said. Each case records once, runs `burnside check` and reads the verdict.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.burn.user_port_harness import BURNSIDE, Checks, assert_named, diagnoses, project, verdict


@pytest.fixture(scope="module")
def vit(programs, tmp_path_factory) -> Path:
    return project("vit", tmp_path_factory.mktemp("user-ports"))


run = Checks("--checkpoint", "checkpoint/model.pt")


def _check(port: Path, *options: str, reference: bool = True) -> subprocess.CompletedProcess:
    """`burnside check` with options of its own (``--features misnamed``), or without the reference."""
    command = [*BURNSIDE, "check", "--burn-crate", ".", "--bin", "user_vit", "--torch-trace",
               "traces/torch.safetensors", *(["--reference", "traces/reference.safetensors"] if reference else []),
               *options, "--", "--checkpoint", "checkpoint/model.pt"]
    return subprocess.run(command, cwd=port, capture_output=True, text=True, timeout=900)


def test_the_faithful_vit_is_ok_with_no_diagnosis(vit):
    proc = run(vit, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout


def test_without_a_reference_its_rounding_gets_no_cause(vit):
    proc = _check(vit, reference=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the default tolerance without a referee
    assert not diagnoses(proc), proc.stdout
    assert "without a float64 reference this cannot be told from rounding" in proc.stdout, proc.stdout


VIT_BUGS = [
    ("ln-eps", "D011", ["blocks.0.norm1 (LayerNorm)", "epsilon measured 1e-6 on A (pytorch), 1e-5 on B (burn)"]),
    # the patch conv copied from a 3x3 conv: padding 1, the same 4x4 patches
    ("conv-pad1", "D011", ["patch_embed (Conv2d)", "B (burn) with stride (8, 8), padding (1, 1)"]),
    # the head's input found as a token of the encoder's output on each side
    ("last-token", "D010", ["step0.activations.head differs", "head of `norm's last token`",
                            "where A's head reads `norm's first token`", "feed head norm's first token"]),
    # the attention's slips between qkv and proj: proj re-run on PyTorch's qkv output names each
    ("scale-dmodel", "D010", ["blocks.0.attn.proj of `attention of blocks.0.attn.qkv (4 heads, scale 1/sqrt(64)",
                              "scale the attention scores by 1/sqrt(head_dim) = 1/sqrt(16)"]),
    ("qkv-order", "D010", ["k q v in that order", "in PyTorch's order (q k v)"]),
    ("softmax-dim", "D010", ["softmax over the queries", "softmax of the scores over the keys"]),
    # the residual added to the normed input: norm2 re-run on PyTorch's tensors says what it read on each side
    ("residual-norm", "D010", ["B (burn)'s output is blocks.0.norm2 of `blocks.0.attn + blocks.0.norm1`",
                               "where A's blocks.0.norm2 reads `blocks.0.attn + blocks.0's input`"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), VIT_BUGS, ids=[case[0] for case in VIT_BUGS])
def test_each_vit_slip_fails_with_the_rule_that_names_it(vit, bug, rule, words):
    proc = run(vit, bug)
    assert_named(proc, rule, words)
    assert "padding_mode" not in proc.stdout and "ignores the dilation" not in proc.stdout


def test_a_field_named_otherwise_is_named_as_one_tensor_renamed(vit):
    proc = _check(vit, "--features", "misnamed")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = diagnoses(proc)
    assert found and all(d.startswith("D014 ") for d in found), found
    assert "B holds a tensor pos_embedding of the same shape" in proc.stdout, proc.stdout


def test_a_port_tapping_no_layer_has_its_layers_captured_and_the_slip_named(vit):
    """No tap at all, and one LayerNorm's epsilon burn's default: its effect on the outputs stays inside rounding's
    noise band (this passed when only the outputs were judged); the captured forward pass compares every layer and
    D011 names the norm."""
    proc = run(vit, "no-taps,ln-eps-one")
    assert_named(proc, "D011", ["blocks.1.norm2 (LayerNorm)", "epsilon measured 1e-6 on A", "1e-5 on B"])
    assert "records no layer" not in proc.stdout, proc.stdout

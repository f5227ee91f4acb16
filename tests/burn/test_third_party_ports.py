"""Ports someone else wrote (issue #35): each crate of tests/burn/third_party/ is written as a public burn crate
is (a library that knows nothing of burnside: its own modules, its own `forward`, its own burn-store loader with a
KeyRemapper from the checkpoint's names to its own), and its `src/main.rs` is the whole port: the crate's loader
on the checkpoint, `Inference::new().run(...)` returning the model's output, no tap and no `with_names`. The
PyTorch side is a model the user did not write either, from PyPI: torchvision's `ResNet(BasicBlock, [1, 1, 1, 1])`
and transformers' `BertModel`.

What the tool should give them: the faithful crate OK with no diagnosis (its layers compared under PyTorch's names,
though the port taps none and renames nothing: the names come from what the port loaded), and each slip, a cargo
feature of the crate that loads without an error, FAIL with the rule that names its cause at the first diverging
PyTorch module.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.burn.user_port_harness import THIRD_PARTY, Checks, assert_named, diagnoses, project, verdict


@pytest.fixture(scope="module")
def resnet(programs, tmp_path_factory) -> Path:
    return project("resnet", tmp_path_factory.mktemp("third-party"), THIRD_PARTY)


@pytest.fixture(scope="module")
def bert(programs, tmp_path_factory) -> Path:
    return project("bert", tmp_path_factory.mktemp("third-party"), THIRD_PARTY)


resnet_run = Checks("--checkpoint", "checkpoint/model.pt", features=True, bin_name="resnet-port")
bert_run = Checks("--checkpoint", "checkpoint", features=True, bin_name="bert-port")


def assert_faithful(proc: subprocess.CompletedProcess, layers: list[str]) -> None:
    """Exit 0, an OK verdict, no diagnosis, and ``layers`` (PyTorch module paths) compared at batch 0 though the
    port taps none."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert "B taps no layer" not in proc.stdout, proc.stdout
    compared = {line.split()[0] for line in proc.stdout.splitlines() if line.startswith("step0.activations.")}
    missing = [layer for layer in layers if f"step0.activations.{layer}" not in compared]
    assert not missing, (missing, proc.stdout)


def assert_slip(proc: subprocess.CompletedProcess, rule: str, module: str, cause: str) -> None:
    """Exit 1, FAIL, ``rule`` the first diagnosis and naming ``module`` (the PyTorch module path where the port first
    computes otherwise), ``cause`` in the output, and no diagnosis about the port's own names for PyTorch's."""
    assert_named(proc, rule, [module, cause])
    first = diagnoses(proc)[0]
    assert module in first, first
    assert "nothing in the port holds" not in proc.stdout, proc.stdout


# --- ResNet: torchvision's ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10), loaded from its state_dict (.pt)

def test_the_faithful_resnet_crate_is_ok_with_no_tap_and_no_rename(resnet):
    assert_faithful(resnet_run(resnet, None), ["conv1", "bn1", "maxpool", "layer1.0", "layer2.0.downsample.0",
                                               "layer4.0", "avgpool", "fc"])


RESNET_SLIPS = [
    # the stem's MaxPool2d(3, 2) without its padding 1: 7x7 maps where torchvision's are 8x8, which still run
    ("bug-pool-padding", "D011", "maxpool (MaxPool2d)", "padding"),
    # every BatchNorm with epsilon 1e-3: the first one is the stem's
    ("bug-bn-eps", "D011", "bn1 (BatchNorm2d)", "epsilon"),
    # BasicBlock's ReLU after the residual add left out: the first block's output is the sum itself, which the ReLU's
    # own measure reads as no activation applied to what A recorded feeding it
    ("bug-no-relu-after-add", "D011", "layer1.0.relu#2 (ReLU)", "B (burn) no activation (the input as it is)"),
    # the downsample's 1x1 conv with stride 1: its output is 8x8 where the block's path is 4x4, and burn's add
    # panics on the shapes; the conv recorded before the panic has the shape that names it
    ("bug-downsample-stride", "D011", "layer2.0.downsample.0", "stride"),
    # the model run on an autodiff device: burn's BatchNorm normalises with the batch's own statistics
    ("bug-bn-autodiff", "D015", "bn1 (BatchNorm2d)", "B's forward pass without autodiff gives A's output"),
    # the classifier's [10, 512] weight read in the file's order into burn's [512, 10]: the shape fits, the values
    # are scrambled
    ("bug-head-transposed", "D014", "fc.weight", "transposed"),
]


@pytest.mark.parametrize(("bug", "rule", "module", "cause"), RESNET_SLIPS, ids=[case[0] for case in RESNET_SLIPS])
def test_each_resnet_slip_fails_at_its_module_with_its_cause(resnet, bug, rule, module, cause):
    assert_slip(resnet_run(resnet, bug), rule, module, cause)


# --- BERT: transformers' BertModel (2 layers, hidden 32), loaded from save_pretrained's model.safetensors

def test_the_faithful_bert_crate_is_ok_with_no_tap_and_no_rename(bert):
    assert_faithful(bert_run(bert, None), [
        "embeddings.word_embeddings", "embeddings.LayerNorm", "encoder.layer.0.attention.self.query",
        "encoder.layer.0.attention.output.dense", "encoder.layer.0.attention.output.LayerNorm",
        "encoder.layer.0.intermediate.dense", "encoder.layer.1.output.LayerNorm", "pooler.dense"])


def test_the_faithful_bert_records_both_outputs_under_their_names(bert):
    proc = bert_run(bert, None)
    for output in ("last_hidden_state", "pooler_output"):
        assert f"step0.outputs.{output} " in proc.stdout, proc.stdout


BERT_SLIPS = [
    # the encoder's LayerNorms at burn's default 1e-5 where config.json says 1e-12 (the embeddings' is right)
    ("bug-ln-eps", "D011", "encoder.layer.0.attention.output.LayerNorm (LayerNorm)", "epsilon"),
    # the feed-forward's GELU in tanh form where config.json's hidden_act "gelu" is HF's GELUActivation (erf): the
    # captured op that stands for the activation module is measured as it is
    ("bug-gelu-tanh", "D011", "encoder.layer.0.intermediate.intermediate_act_fn (GELUActivation)",
     "B (burn) the tanh approximation"),
    # the attention mask never applied: the padded row's tokens attend to its padding; BertSelfAttention's own
    # output is the heads' context, compared with the attention of its query, key and value
    ("bug-mask-ignored", "D010", "encoder.layer.0.attention.self (BertSelfAttention)",
     "no mask where A's has padding mask (attention_mask 0 masked)"),
    # the loader's KeyRemapper sends `query` to the crate's `key` and `key` to `query`: both load, and the
    # attention's scores are K Q^T; the names from what the port loaded contradict the crate's own (its `query`
    # holds the checkpoint's `key`), which is the loading fault
    ("bug-qk-swapped", "D014", "encoder.layer.0.attention.self.query.weight",
     "holds the checkpoint's encoder.layer.0.attention.self.key.weight"),
    # position ids from 1: each token looks up the next position's embedding, read back from the lookup's rows
    ("bug-position-offset", "D010", "embeddings.position_embeddings (Embedding)",
     "looks up positions 1..12 where A's looks up 0..11 (offset +1)"),
    # the token-type embedding not added: the embeddings' LayerNorm is fed word + position only
    ("bug-no-token-type", "D008", "embeddings.token_type_embeddings (Embedding)", "never reads"),
]


@pytest.mark.parametrize(("bug", "rule", "module", "cause"), BERT_SLIPS, ids=[case[0] for case in BERT_SLIPS])
def test_each_bert_slip_fails_at_its_module_with_its_cause(bert, bug, rule, module, cause):
    assert_slip(bert_run(bert, bug), rule, module, cause)

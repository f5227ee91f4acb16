"""Two models ported by following only the README, as a new user ports them (`burnside new`, then the
model replaced on both sides): a tiny GPT (token and position embeddings, RMSNorm with eps=None, causal
self-attention with its mask a non-persistent buffer, SwiGLU, a head tied to the token embedding, AdamW
with two parameter groups, clip_grad_norm_, a warmup LambdaLR) and a UNet-style denoiser (Conv2d,
GroupNorm, InstanceNorm2d(affine=True), PReLU shared and per channel, ConvTranspose2d, a skip
concatenation, MSE, SGD with Nesterov momentum and weight decay, a cosine schedule).

Each project is in `user_ports/<name>/` (model.py, record.py, Cargo.toml, src/main.rs); its port takes
`--bug NAME` to build one realistic porting slip in. Each test records the PyTorch side with the
project's own record.py, builds the port with `burnside check` and reads the verdict: the faithful port
is OK with no diagnosis, each slip FAILs with the rule that names its cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.burn.user_port_harness import assert_named, check, diagnoses, project, verdict

@pytest.fixture(scope="module")
def gpt(programs, tmp_path_factory) -> Path:
    return project("gpt", tmp_path_factory.mktemp("user-ports"))


@pytest.fixture(scope="module")
def unet(programs, tmp_path_factory) -> Path:
    return project("unet", tmp_path_factory.mktemp("user-ports"))


def test_the_faithful_gpt_is_ok_with_no_diagnosis(gpt):
    # the causal mask is a non-persistent buffer burn has no counterpart of; the head is tied to wte;
    # RMSNorm's eps=None is float32's epsilon in the loop and in its float64 reference alike
    proc = check(gpt)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith(("only in A:", "only in B:"))], proc.stdout
    assert "constant buffers only in A (registered with persistent=False" in proc.stdout, proc.stdout


def test_the_faithful_unet_is_ok_with_no_diagnosis(unet):
    # down.bias feeds an InstanceNorm: its gradient is rounding noise and only the weight decay moves it
    proc = check(unet)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout


GPT_BUGS = [
    # a separate head initialised from the embedding, where PyTorch ties lm_head.weight = wte.weight
    ("untied", "D012", ["lm_head.weight", "ties it to wte.weight", "never freeze lm_head.weight"]),
    # the causal mask left out: the attention between c_attn and c_proj reads the future, which c_proj re-run on
    # PyTorch's c_attn output shows
    ("no-mask", "D010", ["B (burn)'s output is h.0.attn.c_proj of `attention of h.0.attn.c_attn (", "no mask",
                         "mask the attention scores causally"]),
    # the no-decay group built from the decay group's spec without .with_weight_decay(0.0)
    ("nodecay-wd", "D005", ["weight_decay", "h.0.ln_1.weight", "pytorch 0.0, burn 0.01"]),
    # RMSNorm's epsilon 1e-6 where PyTorch's eps=None is float32's: ln_1 is fed wte + wpe, no recorded layer's
    # output, so it is measured from the input PyTorch recorded feeding it
    ("rms-eps", "D011", ["h.0.ln_1 (RMSNorm)", "epsilon"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), GPT_BUGS, ids=[case[0] for case in GPT_BUGS])
def test_each_gpt_slip_fails_with_the_rule_that_names_it(gpt, bug, rule, words):
    proc = check(gpt, "--bug", bug)
    assert_named(proc, rule, words)


UNET_BUGS = [
    # GroupNorm(4, 8) ported with 2 groups
    ("gn-groups", "D011", ["gn1 (GroupNorm)", "over 4 groups", "B (burn) over 2", "GroupNormConfig::new(4, channels)"]),
    # InstanceNorm2d's epsilon 1e-3 where PyTorch's is 1e-5
    ("in-eps", "D011", ["inorm (InstanceNorm2d)", "epsilon measured 1e-5 on A (pytorch), 0.001 on B (burn)"]),
    # the MSE summed where F.mse_loss averages: named by the loss recomputed from each side's outputs
    ("mse-sum", "D017", ["MSE (mean)", "MSE (sum)", "Reduction::Mean"]),
    # SGD without nesterov=True
    ("no-nesterov", "D005", ["nesterov: pytorch True, burn False"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), UNET_BUGS, ids=[case[0] for case in UNET_BUGS])
def test_each_unet_slip_fails_with_the_rule_that_names_it(unet, bug, rule, words):
    proc = check(unet, "--bug", bug)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" FAIL"), proc.stdout
    found = diagnoses(proc)
    # the cause first: the summed MSE makes the port diverge at step 3, and D016 follows D017
    assert found and found[0].startswith(f"{rule} "), found
    for word in words:
        assert word in proc.stdout, (word, found)
    # no diagnosis says the optimizer does other than it declares on a slip of the forward or the loss
    if rule != "D005":
        assert not [line for line in found if line.startswith(("D005 ", "D009 "))], found

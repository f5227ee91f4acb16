"""Two model families ported by following only the README, as new users port them (`burnside new`, then the
model replaced on both sides), each with the realistic slips of its kind built in:

- a convolutional VAE (`user_ports/vae/`): several outputs in training (recon logits, mu, logvar), its noise eps a
  batch input, a loss of two terms (BCE-with-logits summed, written elementwise in burn, plus a KL term written by
  hand, divided by the batch), ConvTranspose2d with output_padding, Adam; every layer tapped;
- a seq2seq Transformer (`user_ports/seq2seq/`): burn's own TransformerEncoder/Decoder loaded with renames, a
  persistent sinusoidal table (computed inline in the port), source and target padding masks and a causal mask,
  a head tied to the embedding, cross-entropy with label smoothing 0.1 and ignore_index 0, Adam with a Noam
  schedule; taps at the layers burn's modules expose.

The faithful ports are OK with no diagnosis (the VAE with and without a float64 reference: its summed loss and its
decoder's bias gradients are float32 sums of 2048 terms, which burn adds a few accumulators at a time and PyTorch
pairwise). Each slip FAILs with the rule that names its cause, and the words a user needs to repair it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.burn.user_port_harness import BURNSIDE, Checks, assert_named, diagnoses, project, verdict

vae_check = Checks()
seq2seq_check = Checks()


@pytest.fixture(scope="module")
def vae(programs, tmp_path_factory) -> Path:
    return project("vae", tmp_path_factory.mktemp("user-ports"))


@pytest.fixture(scope="module")
def seq2seq(programs, tmp_path_factory) -> Path:
    return project("seq2seq", tmp_path_factory.mktemp("user-ports"))


def test_the_faithful_vae_is_ok_with_no_diagnosis(vae):
    proc = vae_check(vae, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout


def test_the_faithful_vae_is_ok_without_a_reference(vae):
    # without a referee, the loss and bias gradients are within what a float32 sum of their terms rounds by,
    # and the verdict says so, naming the reference that would judge them
    proc = subprocess.run([*BURNSIDE, "check", "--burn-crate", ".", "--bin", "user_vae", "--torch-trace",
                           "traces/torch.safetensors"], cwd=vae, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert "are float32 sums of many terms within the rounding such a sum carries" in proc.stdout, proc.stdout
    assert "a sum of 2048 terms" in proc.stdout, proc.stdout


VAE_SLIPS = [
    # the KL term written with its sign flipped: the loss's hand-written part, measured against the BCE term the
    # PyTorch recorder saw inside the loss
    ("kl-sign", "D017", ["the hand-written part", "is flipped in sign", "its sign (a KL divergence is"]),
    # the KL's 0.5 left out
    ("kl-half", "D017", ["is twice PyTorch's (a factor 0.5 left out)", "the factor 0.5 it leaves out"]),
    # exp(0.5 * logvar) where the KL takes exp(logvar): the hand-written part by its measured factor
    ("kl-logvar", "D017", ["the hand-written part", "where A (pytorch)'s is", "exp(0.5 * logvar)"]),
    # burn's elementwise BCE averaged where F.binary_cross_entropy_with_logits(reduction='sum') sums
    ("bce-mean", "D017", ["averages over its 2048 elements (PyTorch's sums them)", "`.sum()`"]),
    # the noise drawn from burn's RNG and recorded as what the port fed
    ("eps-rng-recorded", "D006", ["fed other numbers, not a rounding of the same ones",
                                  "step.float_input::<2>(\"eps\")"]),
    # the reparameterisation's std as exp(logvar): dec_fc re-run on what A recorded reads the reparameterisation
    # with the log-variance's exponent unscaled
    ("std-exp", "D010", ["B (burn)'s output is dec_fc of `fc_mu + input eps * exp(fc_logvar)`",
                         "where A's dec_fc reads `fc_mu + input eps * exp(0.5 * fc_logvar)`",
                         "`fc_mu + eps * fc_logvar.mul_scalar(0.5).exp()`"]),
    # the ReLU between the two ConvTranspose2d left out: the tapped ReLU module passes its input through
    ("no-relu-dec", "D011", ["dec_act2 (ReLU)", "B (burn) no activation (the input as it is)",
                             "`burn::tensor::activation::relu`"]),
    # the first ConvTranspose2d without output_padding, its 7x7 output padded to 8x8 by hand so it runs
    ("output-padding-pad", "D010", ["step0.activations.dec_conv1"]),
    # burn's Adam epsilon
    ("adam-eps", "D009", ["eps"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), VAE_SLIPS, ids=[case[0] for case in VAE_SLIPS])
def test_each_vae_slip_fails_with_the_rule_that_names_it(vae, bug, rule, words):
    assert_named(vae_check(vae, bug), rule, words)


def test_a_convtranspose_without_its_output_padding_crashes_and_the_layer_is_named(vae):
    # burn's add panics on the 14x14 reconstruction: the check says which layer's output parted first, from the
    # shapes the port had recorded before the panic, with the settings that decide a ConvTranspose2d's shape
    proc = vae_check(vae, "output-padding")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "before the panic the port recorded step0.activations.dec_conv1 (ConvTranspose2d) of shape [8, 8, 7, 7] " \
           "where PyTorch's is [8, 8, 8, 8]" in proc.stderr, proc.stderr
    assert "output_padding, stride, padding" in proc.stderr and "output_padding (1, 1)" in proc.stderr, proc.stderr


def test_the_faithful_seq2seq_is_ok_with_no_diagnosis(seq2seq):
    proc = seq2seq_check(seq2seq, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert "constant buffers only in A" in proc.stdout, proc.stdout


SEQ2SEQ_SLIPS = [
    # cross_entropy(label_smoothing=0.1, ignore_index=0) solved jointly: each setting left out is named with the burn
    # config that has both
    ("no-smoothing", "D017", ["label smoothing 0.1 ignoring target 0",
                              "CrossEntropyLossConfig::new().with_smoothing(Some(0.1)).with_pad_tokens(Some(vec![0]))"]),
    ("no-ignore", "D017", ["B (burn)'s is cross-entropy with label smoothing 0.1 (",
                           "CrossEntropyLossConfig::new().with_smoothing(Some(0.1)).with_pad_tokens(Some(vec![0]))"]),
    # the Noam schedule evaluated one step ahead
    ("noam-offset", "D005", ["counted 1 step ahead", "evaluate the schedule at the step PyTorch's does"]),
    # a separate head initialised from the embedding where PyTorch ties them
    ("untied", "D012", ["head.weight", "embed.weight"]),
    # burn's Adam epsilon where PyTorch's is 1e-9
    ("adam-eps", "D004", ["eps=1e-09"]),
    # the causal mask left out, the source padding mask left out or inverted: burn's TransformerDecoder/Encoder are
    # tapped at the layer; PyTorch's layer re-run on A's recorded tensors with each attention's masks found from its
    # own recorded output, one changed at a time
    ("no-causal", "D010", ["decoder.layers.0.self_attn runs with the padding mask of the ids embed#2 is fed (id 0 "
                           "masked) where PyTorch's has the padding mask of the ids embed#2 is fed (id 0 masked) and a "
                           "causal mask", ".target_mask_attn(generate_autoregressive_mask(batch, seq, &device))"]),
    ("no-src-pad", "D010", ["encoder.layers.0.self_attn runs with no mask where PyTorch's has the padding mask of "
                            "the batch's `src`",
                            "TransformerEncoderInput::new(x).mask_pad(src.clone().equal_elem(0))"]),
    ("pad-inverted", "D010", ["the padding mask of the batch's `src` inverted", "invert encoder.layers.0.self_attn's "
                              "padding mask"]),
    # the decoder's cross-attention fed the source embeddings: the encoder's parameters get no gradient, and the
    # layer re-run says what the cross-attention read
    ("memory", "D008", ["encoder.layers.0", "reads encoder's input as its keys and values where PyTorch's reads "
                        "encoder's output (the memory)", "TransformerDecoderInput::new(target, memory)"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), SEQ2SEQ_SLIPS, ids=[case[0] for case in SEQ2SEQ_SLIPS])
def test_each_seq2seq_slip_fails_with_the_rule_that_names_it(seq2seq, bug, rule, words):
    assert_named(seq2seq_check(seq2seq, bug), rule, words)

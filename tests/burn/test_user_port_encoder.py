"""A pretrained encoder's inference port, written by following only the README's "Inference ports" as a new
user writes it (`burnside new --inference`, then the model replaced on both sides): token embedding plus
learned positions, two post-norm `nn.TransformerEncoderLayer`s (d_model 32, 4 heads, feed-forward 64, ReLU,
dropout 0.1, batch first), a final LayerNorm and a Linear head, saved with `torch.save(state_dict)`.

The burn port (`user_ports/encoder/src/main.rs`) loads the `.pt` with `burnside_trace::load_pytorch_checkpoint`
(burn-store's readers; `in_proj` cut into query, key and value) into the layer written out with burn's
MultiHeadAttention, Linear, LayerNorm and ReLU, on a device without autodiff, and takes `--bug NAME` to build
one porting slip in. Each case records once, runs `burnside check` and reads the verdict; the cases marked
xfail are verdicts burnside gets wrong today, with what it says.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from burnside.burn.locate import rust_workspace, trace_crate

BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]
PORT = Path(__file__).resolve().parent / "user_ports" / "encoder"


@pytest.fixture(scope="module")
def encoder(programs, tmp_path_factory) -> Path:
    """The project copied out of the checkout (check writes into it), on the installed burnside-trace and
    burnside's Cargo.lock, as `burnside new --inference` makes it, with its checkpoint and PyTorch side
    recorded once."""
    port = tmp_path_factory.mktemp("user-ports") / "encoder"
    shutil.copytree(PORT, port, ignore=shutil.ignore_patterns("traces", "checkpoint", "burnside-out", "__pycache__"))
    manifest = port / "Cargo.toml"
    relative = 'burnside-trace = { path = "../../../../rust/burnside-trace" }'
    assert relative in manifest.read_text()
    manifest.write_text(manifest.read_text().replace(
        relative, f'burnside-trace = {{ path = "{trace_crate().resolve()}" }}'))
    shutil.copyfile(rust_workspace() / "Cargo.lock", port / "Cargo.lock")
    recorded = subprocess.run([sys.executable, "record.py"], cwd=port, capture_output=True, text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    return port


def check(port: Path, *port_args: str) -> subprocess.CompletedProcess:
    args = ["check", "--burn-crate", ".", "--bin", "user_encoder", "--torch-trace", "traces/torch.safetensors",
            "--reference", "traces/reference.safetensors", "--", "--checkpoint", "checkpoint/model.pt", *port_args]
    return subprocess.run([*BURNSIDE, *args], cwd=port, capture_output=True, text=True, timeout=900)


def verdict(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("worst=")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return lines[0]


def diagnoses(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith("D0")]


_runs: dict[str | None, subprocess.CompletedProcess] = {}


def run(port: Path, bug: str | None) -> subprocess.CompletedProcess:
    """One `burnside check` per port variant, shared by the cases that read it."""
    if bug not in _runs:
        _runs[bug] = check(port, *(["--bug", bug] if bug else []))
    return _runs[bug]


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
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" FAIL"), proc.stdout
    found = diagnoses(proc)
    assert found and found[0].startswith(f"{rule} "), found
    for word in words:
        assert word in proc.stdout, (word, found)

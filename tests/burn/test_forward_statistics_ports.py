"""Inference ports checked against forward traces recorded with statistics (`record_forward(..., statistics=True)`,
forced on: these models are small), as a large model's check runs: the parameters as statistics on both sides (the
load check by hash), the layers in full at the full batches and as statistics between.

Two existing ports, each recorded by its own record.py with statistics asked for: the third-party ResNet crate
(tests/burn/third_party/resnet: no tap, its layers from burn's graph capture, named from what it loaded; 3 batches,
batch 0 in full) and the tiny Llama generation port (tests/burn/user_ports/llama: taps, a cache across batches; the
prompt and the last decode step in full). The faithful ports are OK with no diagnosis; a load slip FAILs at the load
check naming the parameter; a compute slip FAILs at its layer at a full batch, and the statistics rows of the other
batches still show it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from burnside.trace import open_trace
from tests.burn.user_port_harness import PORTS, THIRD_PARTY, check, copy_crate, diagnoses, verdict


def _recorded(source: Path, parent: Path, edits: list[tuple[str, str]]) -> Path:
    """The crate at ``source`` copied into ``parent``, its record.py edited (``edits``: text, replacement) to ask
    for statistics, and run."""
    port = copy_crate(source, parent / source.name)
    record = port / "record.py"
    text = record.read_text()
    for old, new in edits:
        assert old in text, (old, record)
        text = text.replace(old, new)
    record.write_text(text)
    proc = subprocess.run([sys.executable, "record.py"], cwd=port, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return port


@pytest.fixture(scope="module")
def resnet(programs, tmp_path_factory) -> Path:
    port = _recorded(THIRD_PARTY / "resnet", tmp_path_factory.mktemp("statistics"), [
        ("BATCHES = 2", "BATCHES = 3"),
        ('reference=here / "traces" / "reference.safetensors")',
         'reference=here / "traces" / "reference.safetensors", statistics=True, full_steps=[0])')])
    # the checkpoint with one weight one step off: a load slip a port cannot see (a BatchNorm's weight: its bias
    # beside it names the port's module for it, where the hash of its bytes no longer can)
    state = torch.load(port / "checkpoint" / "model.pt")
    state["layer2.0.bn1.weight"][3] += 1e-3
    torch.save(state, port / "checkpoint" / "perturbed.pt")
    return port


@pytest.fixture(scope="module")
def llama(programs, tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    return _recorded(PORTS / "llama", tmp_path_factory.mktemp("statistics"), [
        ('reference=here / "traces" / "reference.safetensors")',
         'reference=here / "traces" / "reference.safetensors", statistics=True, full_steps=[0, -1])')])


_runs: dict[tuple, subprocess.CompletedProcess] = {}


def _resnet(port: Path, feature: str | None = None, checkpoint: str = "model.pt") -> subprocess.CompletedProcess:
    key = ("resnet", feature, checkpoint)
    if key not in _runs:
        _runs[key] = check(port, "--checkpoint", f"checkpoint/{checkpoint}", bin_name="resnet-port",
                           options=("--features", feature) if feature else ())
    return _runs[key]


def _llama(port: Path, bug: str | None = None) -> subprocess.CompletedProcess:
    key = ("llama", bug)
    if key not in _runs:
        _runs[key] = check(port, "--checkpoint", "checkpoint/model.safetensors", *(["--bug", bug] if bug else []))
    return _runs[key]


def _rows(proc: subprocess.CompletedProcess) -> dict[str, str]:
    return {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("step")}


def _failed(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" FAIL"), proc.stdout


def test_both_sides_record_the_same_names_as_statistics(resnet):
    proc = _resnet(resnet)
    torch_trace = open_trace(resnet / "traces" / "torch.safetensors")
    burn = open_trace(resnet / "burnside-out" / "check" / "resnet-port.burn.safetensors")
    assert burn.metadata["params_statistics"] == torch_trace.metadata["params_statistics"] is True
    assert burn.metadata["full_steps"] == torch_trace.metadata["full_steps"] == [0]
    # the port's parameters (under its own names) and its captured operations of batches 1 and 2 as statistics;
    # batch 0's operations, its inputs and outputs in full
    stages = {(n.split(".")[0], n.split(".")[1]) for n in burn.statistics}
    assert stages == {("step0", "params_before"), ("step1", "captured"), ("step2", "captured")}, stages
    assert not [n for n in burn.names if ".params_before." in n]
    assert [n for n in burn.names if n.startswith("step0.captured.")]
    assert all(f"step{k}.outputs.output" in burn for k in range(3))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_faithful_resnet_is_ok_its_load_checked_by_hash(resnet):
    proc = _resnet(resnet)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    rows = _rows(proc)
    for name in ("step0.params_before.conv1.weight", "step0.params_before.fc.weight",
                 "step0.params_before.layer1.0.bn1.weight"):  # under PyTorch's names, from the hashes it loaded
        assert "bit-identical" in rows[name], rows.get(name)
    # batch 0's layers compared in full under PyTorch's names though the port taps none; batch 1's by statistics
    assert "ulps=" in rows["step0.activations.layer1.0.conv1"] and "ulps=" in rows["step0.activations.fc"]
    assert "stats (A statistics, B statistics)" in rows["step1.activations.layer1.0.conv1"]


def test_a_transposed_head_fails_at_the_load_check(resnet):
    proc = _resnet(resnet, "bug-head-transposed")
    _failed(proc)
    first = diagnoses(proc)[0]
    assert first.startswith("D014 ") and "fc.weight" in first and "in another order" in first, first
    assert "first diverging layer per batch: batch 0 fc," in proc.stdout, proc.stdout


def test_one_weight_off_in_the_checkpoint_fails_at_the_load_check_naming_it(resnet):
    proc = _resnet(resnet, checkpoint="perturbed.pt")
    _failed(proc)
    first = diagnoses(proc)[0]
    assert first.startswith("D014 ") and "layer2.0.bn1.weight: B's bytes are not A's" in first, first
    bound = float(re.search(r"max\|A - B\| is at least ([0-9.e+-]+)", first).group(1))
    assert 0 < bound <= 1e-3, first  # a lower bound of the one element's 1e-3
    assert "layer1.0.conv1.weight" not in first
    assert "bit-identical" in _rows(proc)["step0.params_before.layer1.0.conv1.weight"]


def test_a_compute_slip_fails_at_its_layer_where_full_and_shows_in_the_statistics(resnet):
    proc = _resnet(resnet, "bug-bn-eps")
    _failed(proc)
    assert "first diverging layer per batch: batch 0 bn1," in proc.stdout, proc.stdout
    first = diagnoses(proc)[0]
    assert "bn1 (BatchNorm2d)" in first, first
    assert not [d for d in diagnoses(proc) if d.startswith("D014 ")]
    rows = _rows(proc)
    for k in (1, 2):
        row = rows[f"step{k}.activations.bn1"]
        bound = float(re.search(r"\|B-R\|>=([0-9.e+-]+)", row).group(1))
        assert bound > 1e-4, row  # B's bn1 provably far from the reference; A's is not
        assert float(re.search(r"\|A-R\|>=([0-9.e+-]+)", row).group(1)) < 1e-6, row


def test_the_faithful_llama_generation_is_ok(llama):
    proc = _llama(llama)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert "B chooses A's token at every step" in proc.stdout, proc.stdout
    rows = _rows(proc)
    assert "bit-identical" in rows["step0.params_before.model.embed_tokens.weight"]
    assert "ulps=" in rows["step6.activations.model.layers.0.self_attn.o_proj"]
    assert "stats (A statistics, B statistics)" in rows["step3.activations.model.layers.0.self_attn.o_proj"]


def test_a_llama_slip_at_decode_steps_is_placed_at_the_last_full_step(llama):
    proc = _llama(llama, "mask-reuse")
    _failed(proc)
    assert "batch 6 model.layers.0.self_attn.o_proj" in proc.stdout, proc.stdout
    assert "B would choose another token from step 1 on" in proc.stdout, proc.stdout
    rows = _rows(proc)
    row = rows["step1.activations.model.layers.0.self_attn.o_proj"]
    assert float(re.search(r"\|B-R\|>=([0-9.e+-]+)", row).group(1)) > 1e-3, row


def test_a_llama_norm_epsilon_is_measured_at_the_prefill(llama):
    proc = _llama(llama, "rms-eps")
    _failed(proc)
    first = diagnoses(proc)[0]
    assert first.startswith("D011 ") and "model.layers.0.input_layernorm (LlamaRMSNorm)" in first, first

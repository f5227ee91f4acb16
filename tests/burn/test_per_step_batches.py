"""One batch per step (a data loader, a replay buffer): the init file of `burnside check` carries every
step's batch, the cnn port reading `InitFile::float_input_at(step, ..)` trains the same as PyTorch, and
a port that trains on step 0's batch throughout gets a D006 that names the reader of step k's batch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from burnside.burn.locate import rust_workspace, target_dir
from burnside.examples import cnn
from burnside.torch import export_init
from burnside.trace import open_trace

STEPS = 3


@pytest.fixture(scope="module")
def per_step(tmp_path_factory):
    """The cnn example recorded with a new batch each step, and its float64 reference."""
    root = tmp_path_factory.mktemp("per-step")
    torch_trace = cnn.record_torch(root / "cnn.torch.safetensors", steps=STEPS, per_step=True)
    reference = cnn.record_torch(root / "cnn.reference.safetensors", steps=STEPS, per_step=True, reference=True)
    return torch_trace, reference


def check(torch_trace, reference, out_dir, *port_args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "check", "--torch-trace",
                           str(torch_trace), "--burn-crate", str(rust_workspace() / "cnn"), "--bin", cnn.BURN_BIN,
                           "--reference", str(reference), "--out-dir", str(out_dir), "--json", "--",
                           "--steps", str(STEPS), *port_args], capture_output=True, text=True, timeout=900)


def test_check_hands_the_port_every_steps_batch_and_a_port_reading_them_passes(programs, per_step, tmp_path):
    torch_trace, reference = per_step
    proc = check(torch_trace, reference, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["passed"]
    torch, init = open_trace(torch_trace), open_trace(tmp_path / "init.safetensors", kind="init")
    burn = open_trace(tmp_path / "cnn.burn.safetensors")
    assert not np.array_equal(torch.array("step1.inputs.x"), torch.array("step0.inputs.x"))
    for k in range(STEPS):
        for name in ("x", "y"):
            in_init = f"inputs.{name}" if k == 0 else f"step{k}.inputs.{name}"
            assert init.array(in_init).tobytes() == torch.array(f"step{k}.inputs.{name}").tobytes()
            assert burn.array(f"step{k}.inputs.{name}").tobytes() == torch.array(f"step{k}.inputs.{name}").tobytes()
    # the loss after training is the last step's batch's, on both sides
    assert float(burn.array(f"step{STEPS - 1}.loss_after")) == pytest.approx(
        float(torch.array(f"step{STEPS - 1}.loss_after")), abs=1e-5)


def test_a_port_training_on_step_0s_batch_throughout_is_told_to_read_step_ks(programs, per_step, tmp_path):
    torch_trace, reference = per_step
    proc = check(torch_trace, reference, tmp_path, "--bug", "first-batch")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    d006 = next(d for d in doc["diagnosis"] if d["rule"] == "D006")
    assert d006["evidence"].startswith("the PyTorch trace feeds a different batch at steps 1 and 2; B (burn) fed "
                                       "step 0's batch again there: step1.inputs.x: 1024 of 1024 differ")
    assert "step2.inputs.y" in d006["evidence"] and "step0.inputs" not in d006["evidence"]
    assert d006["fix"].startswith("read each step's batch inside the step loop with InitFile::float_input_at(step, "
                                  '..): for step 1, `init.float_input_at::<4>(1, "x", &device)?`')


def test_an_init_file_from_export_init_feeds_the_port_each_steps_batch(programs, tmp_path):
    model, batches = cnn.model_and_batches(STEPS)
    init = export_init(model, batches, tmp_path / "init.safetensors")
    out = tmp_path / "cnn.burn.safetensors"
    proc = subprocess.run([str(target_dir() / "release" / cnn.BURN_BIN), "--init", str(init), "-o", str(out),
                           "--steps", str(STEPS)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    burn = open_trace(out)
    for k, batch in enumerate(batches):
        assert burn.array(f"step{k}.inputs.x").tobytes() == batch["x"].numpy().tobytes()
        assert np.array_equal(burn.array(f"step{k}.inputs.y"), batch["y"].numpy())
    # one step more than the file has batches for is the port's error, not a silent reuse of a batch
    proc = subprocess.run([str(target_dir() / "release" / cnn.BURN_BIN), "--init", str(init), "-o", str(out),
                           "--steps", str(STEPS + 1)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert f"no batch for step {STEPS}: the file holds one batch per step for {STEPS} steps" in proc.stderr

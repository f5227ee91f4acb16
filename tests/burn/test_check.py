"""`burnside check`: a port built from its crate, run from PyTorch's starting point, compared."""

from __future__ import annotations

import subprocess
import sys

from burnside.burn.locate import rust_workspace


def check(torch_trace, out_dir, *args):
    return subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "check",
                           "--torch-trace", str(torch_trace),
                           "--burn-crate", str(rust_workspace() / "train-step"), "--bin", "train-step",
                           "--out-dir", str(out_dir), *args], capture_output=True, text=True, timeout=900)


def test_check_passes_for_a_faithful_port(a1_trace, tmp_path):
    proc = check(a1_trace("torch", "sgd", 3).path, tmp_path, "--", "--steps", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tol=1e-06 OK" in proc.stdout
    assert (tmp_path / "init.safetensors").is_file() and (tmp_path / "train-step.burn.safetensors").is_file()


def test_check_fails_for_a_port_with_the_wrong_optimizer(a1_trace, tmp_path):
    proc = check(a1_trace("torch", "sgd", 3).path, tmp_path, "--", "--steps", "3", "--optim", "adam")
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_check_of_a_missing_bin_is_one_line_exit_2(a1_trace, tmp_path):
    proc = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "check", "--torch-trace",
                           str(a1_trace("torch", "sgd", 1).path), "--burn-crate", str(rust_workspace() / "train-step"),
                           "--bin", "nope", "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: building train-step failed") and "reproduce with:" in proc.stderr
    known = proc.stderr.split("(the binaries cargo knows here: ", 1)[1].split(")", 1)[0].split(", ")
    assert "train-step" in known and "nope" not in known


def test_check_of_a_float64_reference_as_the_torch_trace_is_one_line_exit_2(tmp_path):
    from burnside.examples.a1 import record_reference

    reference = record_reference(tmp_path / "a1.reference.safetensors", steps=1, optim="sgd")
    proc = check(reference, tmp_path / "out", "--", "--steps", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (f"error: {reference} is a float64 reference (burnside.reference.record_reference), "
                           "not the PyTorch trace (burnside.torch.record): pass it as --reference and the trace "
                           "burnside.torch.record wrote as --torch-trace\n")
    assert not (tmp_path / "out" / "init.safetensors").exists()


def test_the_contracts_own_options_after_the_separator_are_one_line_exit_2(a1_trace, tmp_path):
    proc = check(a1_trace("torch", "sgd", 1).path, tmp_path / "out", "--", "-o", str(tmp_path / "mine.safetensors"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: -o is the contract's own") and proc.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists(), "refused before anything is built or written"

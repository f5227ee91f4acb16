"""The pages' silent failures recorded by real burn programs, named by `burnside run a1 --bug`."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=900)


@pytest.mark.parametrize(("bug", "optim", "rules", "absent"), [
    ("discard", "adam", ("D001 optimizer step result discarded", "D003 optimizer state advanced without the model"),
     ("D002", "D004")),
    ("discard", "sgd", ("D001 optimizer step result discarded",), ("D003", "D002")),
    ("othergrads", "sgd", ("D002 gradients matched to another module",), ("D001", "D004")),
    ("epsilon", "adam", ("D004 Adam epsilon differs",), ("D001", "D002", "D005")),
])
def test_each_bug_is_named_with_its_fix(programs, tmp_path, bug, optim, rules, absent):
    proc = run_cli("run", "a1", "--bug", bug, "--optim", optim, "--steps", "3", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for rule in rules:
        assert rule in proc.stdout
    for rule in absent:
        assert rule not in proc.stdout
    assert "fix:" in proc.stdout
    assert (tmp_path / "burnside-out" / "a1" / f"a1-{optim}-3-{bug}.png").is_file()


def test_discarded_steps_leave_the_loss_bit_identical(programs, tmp_path):
    from burnside.burn.a1 import record_a1
    from burnside.trace import open_trace

    trace = open_trace(record_a1(tmp_path / "d.safetensors", steps=3, optim="adam", bug="discard"))
    losses = [trace.array(f"step{k}.loss").tobytes() for k in range(3)]
    assert losses[0] == losses[1] == losses[2]
    assert float(trace.array("step2.optim.step.fc1.weight")) == 3.0  # Adam counted every dropped step
    assert trace.metadata["grads_len"] == [4, 4, 4]


def test_burn_default_epsilon_is_what_the_trace_reports(programs, tmp_path):
    from burnside.burn.a1 import record_a1
    from burnside.trace import open_trace

    trace = open_trace(record_a1(tmp_path / "e.safetensors", steps=1, optim="adam", bug="epsilon"))
    assert trace.optimizer["eps"] == pytest.approx(1e-5)


def test_epsilon_bug_needs_adam(tmp_path):
    proc = run_cli("run", "a1", "--bug", "epsilon", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --bug epsilon is Adam's default epsilon; add --optim adam"

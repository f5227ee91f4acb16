"""Traces built for each comparison case, and a runner for the real console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from burnside.examples.a1 import a1_arrays
from burnside.trace import write_trace

PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def base_metadata(framework: str = "pytorch", steps: int = 1) -> dict:
    return {
        "framework": framework,
        "framework_version": "test",
        "device": "cpu",
        "dtype": "float32",
        "steps": steps,
        "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                      "weight_decay": 0.0, "weight_decay_kind": "l2"},
        "params": PARAMS,
        "grads_len": [4] * steps,
    }


def a1_like_tensors(seed: int = 0) -> dict[str, np.ndarray]:
    """A one-step trace's tensors: A1's real inputs and params, other stages filled deterministically."""
    rng = np.random.default_rng(seed)
    arrays = a1_arrays()
    t = {"step0.inputs.x": arrays["x"], "step0.inputs.y": arrays["y"]}
    for p in PARAMS:
        t[f"step0.params_before.{p}"] = arrays[p]
    t["step0.logits"] = rng.standard_normal((4, 3)).astype(np.float32)
    t["step0.loss"] = np.array(1.1400575, dtype=np.float32)
    for p in PARAMS:
        t[f"step0.grads.{p}"] = rng.standard_normal(arrays[p].shape).astype(np.float32) * 0.1
        t[f"step0.params_after.{p}"] = (arrays[p] - 0.1 * t[f"step0.grads.{p}"]).astype(np.float32)
    t["step0.loss_after"] = np.array(1.10596, dtype=np.float32)
    return t


@pytest.fixture
def write(tmp_path: Path):
    """write(name, tensors, **metadata overrides) -> path of a real trace file."""

    def _write(name: str, tensors: dict[str, np.ndarray], framework: str = "pytorch", **meta) -> Path:
        # `steps` and `grads_len` follow the tensors given, as a recorder's would
        steps = 1 + max((int(n.split(".")[0][4:]) for n in tensors if n.startswith("step")), default=0)
        metadata = base_metadata(framework, steps) | meta
        return write_trace(tmp_path / name, tensors, metadata)

    return _write


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the installed `burnside` entry point for real (exit codes, stderr, no traceback)."""
    return subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


def next_f32(value: float, ulps: int = 1) -> np.float32:
    """The f32 `ulps` representable values above `value`."""
    v = np.float32(value)
    for _ in range(ulps):
        v = np.nextafter(v, np.float32(np.inf), dtype=np.float32)
    return v

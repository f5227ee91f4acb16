"""What `burnside compare` prints for a person to read: one line per stage for tensors of another shape and for
tensors on one side only (a count, the first names, where the whole list is), the whole list in `--json` and the
HTML report; `--only` repeatable (a tensor any glob matches) and `--skip` (repeatable, leaves tensors out).

Side A is recorded by `burnside.torch.record_forward` / `record`; side B stands for the port: a model with the
fault, recorded the same way, without what the burn recorder never writes (`layer_inputs`), marked as burn's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from burnside.torch import record, record_forward
from burnside.trace import open_trace, write_trace

BATCHES = 3


def burnside(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=600)


class Pooled(nn.Module):
    """Two convolutions before an adaptive pooling: a padding slip in the first changes every shape up to the
    pooling, which gives the same shape on both sides again."""

    def __init__(self, padding: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=padding)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        x = self.relu2(self.conv2(self.relu1(self.conv1(x))))
        return self.fc(self.pool(x).flatten(1))


def as_port(path: Path, drop_stage: str | None = None) -> Path:
    """Mark a trace as the burn port's, without the tensors of ``drop_stage``."""
    trace = open_trace(path)
    kept = {n: np.array(trace.array(n)) for n in trace.names if drop_stage is None or f".{drop_stage}." not in n}
    metadata = trace.metadata | {"framework": "burn", "framework_version": "0.22.1"}
    if drop_stage == "layer_inputs":
        metadata.pop("layer_inputs", None)
    write_trace(path, kept, metadata)
    return path


@pytest.fixture(scope="module")
def padding_slip(tmp_path_factory) -> tuple[Path, Path]:
    """PyTorch's model and a port whose first convolution has no padding, three batches each."""
    root = tmp_path_factory.mktemp("padding")
    torch.manual_seed(0)
    model = Pooled(padding=1)
    port = Pooled(padding=0)
    port.load_state_dict(model.state_dict())
    torch.manual_seed(1)
    batches = [{"x": torch.randn(2, 2, 8, 8)} for _ in range(BATCHES)]
    a = record_forward(model, batches, root / "a.safetensors")
    b = as_port(record_forward(port, batches, root / "b.safetensors"), drop_stage="layer_inputs")
    return a, b


def test_a_padding_slip_is_one_shape_line_for_every_later_layer_in_every_batch(padding_slip, tmp_path):
    a, b = padding_slip
    proc = burnside("compare", str(a), str(b), "--report", str(tmp_path / "page.html"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    shape = [line for line in lines if "mismatch" in line]
    # conv1, relu1, conv2, relu2 in each of the three batches: 12 tensors, one line before the verdict
    assert shape == ["shape mismatch in 12 activations tensors: "
                     "step0.activations.conv1 (A [2, 4, 8, 8], B [2, 4, 6, 6]), "
                     "step0.activations.relu1 (A [2, 4, 8, 8], B [2, 4, 6, 6]), "
                     "step0.activations.conv2 (A [2, 4, 8, 8], "
                     "B [2, 4, 6, 6]) and 9 more (`--json` lists them all under structure, the HTML report (--report) "
                     "too)"], proc.stdout
    assert lines.index(shape[0]) < next(i for i, line in enumerate(lines) if line.startswith("worst="))
    assert ("first divergence: step0.activations.conv1 (Conv2d) in batch 0: its shape is [2, 4, 8, 8] in A"
            in proc.stdout)
    # what PyTorch fed each layer, which a port does not record: one line, not a line per tensor
    unrecorded = [line for line in lines if line.startswith("not recorded in B")]
    assert unrecorded == [
        "not recorded in B (optional, not compared): 18 layer_inputs tensors (what PyTorch fed each layer; a port "
        "records none): step0.layer_inputs.conv1, step0.layer_inputs.relu1, step0.layer_inputs.conv2 and 15 more "
        "(`--json` lists them all under unrecorded_in_b, the HTML report (--report) too)"], proc.stdout

    shapes = {f"step{k}.activations.{m}" for k in range(BATCHES) for m in ("conv1", "relu1", "conv2", "relu2")}
    as_json = burnside("compare", str(a), str(b), "--json")
    assert as_json.returncode == 1, as_json.stderr
    result = json.loads(as_json.stdout)
    assert {p["name"] for p in result["structure"]} == shapes
    assert len(result["unrecorded_in_b"]) == 18
    page = (tmp_path / "page.html").read_text()
    assert "<h2 id=\"not-compared\">Not compared</h2>" in page
    assert all(f"<td class=name>{name}</td>" in page for name in shapes | set(result["unrecorded_in_b"]))


def test_a_few_tensors_of_another_shape_or_on_one_side_are_each_named(tmp_path):
    # below the count nothing is left out: three names, no pointer to the whole list
    torch.manual_seed(0)
    model = Pooled(padding=1)
    port = Pooled(padding=0)
    port.load_state_dict(model.state_dict())
    batch = {"x": torch.randn(2, 2, 8, 8)}
    a = record_forward(model, batch, tmp_path / "a.safetensors", layer_inputs=False)
    b = as_port(record_forward(port, batch, tmp_path / "b.safetensors", layer_inputs=False))
    proc = burnside("compare", str(a), str(b), "--only", "*.conv1", "--only", "*.relu1", "--only", "*.fc")
    lines = [line for line in proc.stdout.splitlines() if "mismatch" in line]
    assert lines == ["shape mismatch in 2 activations tensors: activations.conv1 (A [2, 4, 8, 8], B [2, 4, 6, 6]), "
                     "activations.relu1 (A [2, 4, 8, 8], B [2, 4, 6, 6])"], proc.stdout


@pytest.fixture(scope="module")
def training(tmp_path_factory) -> tuple[Path, Path]:
    """Two steps of SGD on a small MLP, and a port whose gradients of `fc2.bias` are off."""
    root = tmp_path_factory.mktemp("training")
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(4, 8))
    model.add_module("act", nn.ReLU())
    model.add_module("fc2", nn.Linear(8, 3))
    batch = {"x": torch.randn(6, 4), "y": torch.randint(0, 3, (6,))}
    a = record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, root / "a.safetensors", steps=2)
    trace = open_trace(a)
    tensors = {n: np.array(trace.array(n)) for n in trace.names if ".layer_inputs." not in n}
    for k in range(2):
        tensors[f"step{k}.grads.fc2.bias"] = tensors[f"step{k}.grads.fc2.bias"] + np.float32(0.5)
    metadata = {key: value for key, value in trace.metadata.items() if key != "layer_inputs"}
    b = write_trace(root / "b.safetensors", tensors, metadata | {"framework": "burn", "framework_version": "0.22.1"})
    return a, b


def rows(proc: subprocess.CompletedProcess) -> list[str]:
    return [line.split()[0] for line in proc.stdout.splitlines() if line.startswith("step")]


def test_only_given_twice_keeps_a_tensor_either_glob_matches(training):
    a, b = training
    proc = burnside("compare", str(a), str(b), "--only", "step0.inputs.*", "--only", "*.loss_after")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rows(proc) == ["step0.inputs.x", "step0.inputs.y", "step1.loss_after"]


def test_skip_leaves_the_tensors_it_matches_out(training):
    a, b = training
    failing = burnside("compare", str(a), str(b))
    assert failing.returncode == 1 and "step0.grads.fc2.bias" in rows(failing)
    proc = burnside("compare", str(a), str(b), "--skip", "*.grads.*", "--skip", "*.layer_inputs.*")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rows(proc) and not [name for name in rows(proc) if ".grads." in name]
    assert set(rows(failing)) - set(rows(proc)) == {f"step{k}.grads.fc{i}.{p}" for k in (0, 1) for i in (1, 2)
                                                     for p in ("weight", "bias")}
    both = burnside("compare", str(a), str(b), "--only", "step1.*", "--skip", "*.bias")
    assert both.returncode == 0, both.stdout + both.stderr
    assert rows(both) and all(n.startswith("step1.") and not n.endswith(".bias") for n in rows(both))
    assert "step1.grads.fc2.weight" in rows(both)


def test_options_that_leave_nothing_to_compare_are_one_line_exit_2(training):
    a, b = training
    proc = burnside("compare", str(a), str(b), "--only", "step0.*", "--skip", "step*")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: --only 'step0.*' --skip 'step*' leave no tensor present in both traces to "
                                   "compare")
    proc = burnside("compare", str(a), str(b), "--only", "nothing", "--only", "none")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --only 'nothing' --only 'none' match no tensor present in both traces"

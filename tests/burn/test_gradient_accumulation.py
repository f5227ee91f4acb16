"""Gradient accumulation over micro-batches on real PyTorch and a real burn port (`accum_port/`: an MLP whose
loop is `Training::with_accumulation(M)`, or the same written call by call with `TraceRecorder`): the faithful
port is OK with no diagnosis and its trace is the call-by-call loop's bit for bit; a port stepping every
micro-batch, one averaging the accumulated gradients where PyTorch sums them, one dividing its loss by M where
PyTorch's loss_fn does not, and one that does not accumulate at all each fail with D018 and its fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from burnside.burn.port import record_port
from burnside.compare import Tolerance, Tolerances
from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace
from tests.burn.user_port_harness import Mlp, copy_crate

STEPS, M = 3, 4
PORT = Path(__file__).resolve().parent / "accum_port"


@pytest.fixture(scope="module")
def port(tmp_path_factory) -> Path:
    """The port copied out of the checkout, on the installed burnside-trace and burnside's Cargo.lock."""
    return copy_crate(PORT, tmp_path_factory.mktemp("accum-port") / "accum_port")


def make_optimizer(name: str, model: nn.Module) -> torch.optim.Optimizer:
    return (torch.optim.SGD(model.parameters(), lr=0.1) if name == "sgd"
            else torch.optim.Adam(model.parameters(), lr=0.01))


@pytest.fixture(scope="module")
def torch_side(tmp_path_factory):
    """``torch_side(optim) -> (trace, reference)``: the MLP from seed 0 accumulating M micro-batches a step, a new
    micro-batch each time (STEPS * M batches), recorded once per optimizer."""
    root = tmp_path_factory.mktemp("accum-torch")
    cache: dict[str, tuple[Path, Path]] = {}

    def get(optim: str) -> tuple[Path, Path]:
        if optim not in cache:
            torch.manual_seed(0)
            model = Mlp()
            batches = [{"x": torch.randn(4, 4), "y": torch.randint(0, 3, (4,))} for _ in range(STEPS * M)]
            trace, reference = root / f"{optim}.torch.safetensors", root / f"{optim}.reference.safetensors"
            record(model, make_optimizer(optim, model), batches, trace, accumulate=M, reference=reference)
            cache[optim] = (trace, reference)
        return cache[optim]

    return get


def compared(port: Path, torch_side, tmp_path: Path, optim: str, *args: str):
    trace, reference = torch_side(optim)
    burn = record_port(trace, port, "accum_port", ["--accumulate", str(M), "--optim", optim, *args], tmp_path / "burn")
    comparison = compare_with_evidence(trace, burn, Tolerances(Tolerance(atol=1e-6)), reference=reference)
    found = diagnose(comparison)
    if any(d.rule == "D018" for d in found):
        # the cause first; the update and loss differences that follow from it are not listed apart
        assert found[0].rule == "D018" and not {"D009", "D010"} & {d.rule for d in found}, [d.rule for d in found]
    return burn, comparison, {d.rule: d for d in found}


def test_pytorch_records_each_micro_batch_and_the_summed_gradient(torch_side):
    trace = open_trace(torch_side("sgd")[0])
    assert trace.metadata["accumulate"] == M and trace.steps == STEPS
    assert not any(".inputs." in n or n.endswith(".logits") or ".activations." in n for n in trace.names)
    for k in range(STEPS):
        losses = [trace.array(f"step{k}.micro_loss.{j}") for j in range(M)]
        total = np.float32(losses[0])
        for loss in losses[1:]:
            total = np.float32(total + loss)
        assert trace.array(f"step{k}.loss").tobytes() == total.tobytes()  # the sum, in order, in float32
        assert trace.info(f"step{k}.micro_logits.0").shape == (4, 3)
    # micro-batch j of step k is batch k * M + j: every micro-batch a different batch
    xs = [trace.array(f"step{k}.micro_inputs.{j}.x").tobytes() for k in range(STEPS) for j in range(M)]
    assert len(set(xs)) == STEPS * M
    # SGD without momentum steps on exactly the accumulated gradient
    step = trace.array("step0.params_before.fc1.weight") - 0.1 * trace.array("step0.grads.fc1.weight")
    np.testing.assert_allclose(trace.array("step0.params_after.fc1.weight"), step, rtol=0, atol=1e-7)


@pytest.mark.parametrize("optim", ["sgd", "adam"])
def test_a_faithful_port_is_ok_with_no_diagnosis_and_its_own_loop_records_the_same(port, torch_side,
                                                                                  tmp_path, optim):
    burn, comparison, found = compared(port, torch_side, tmp_path / "training", optim)
    assert comparison.passed and not found, (comparison.failed_rows[:3], found)
    assert open_trace(burn).metadata["accumulate"] == M
    manual, comparison, found = compared(port, torch_side, tmp_path / "manual", optim, "--manual")
    assert comparison.passed and not found
    a, b = open_trace(burn), open_trace(manual)
    assert set(a.names) == set(b.names)
    for name in a.names:
        assert a.array(name).tobytes() == b.array(name).tobytes(), name


def test_a_port_stepping_every_micro_batch_is_named_with_the_step_count(port, torch_side, tmp_path):
    _, comparison, found = compared(port, torch_side, tmp_path, "adam", "--bug", "step-each")
    assert not comparison.passed and "D018" in found
    d018 = found["D018"]
    assert "steps its optimizer between micro-batches" in d018.evidence
    assert "micro-batch 1's do not" in d018.evidence and f"counts {M} steps where PyTorch counts 1" in d018.evidence
    assert "GradientsAccumulator" in d018.fix and f"with_accumulation({M})" in d018.fix


@pytest.mark.parametrize("optim", ["sgd", "adam"])
def test_a_port_averaging_the_accumulated_gradient_is_named_with_the_ratio(port, torch_side, tmp_path,
                                                                          optim):
    _, comparison, found = compared(port, torch_side, tmp_path, optim, "--bug", "mean")
    assert not comparison.passed and "D018" in found, sorted(found)
    d018 = found["D018"]
    assert f"is the mean of the {M} micro-batches' where" in d018.evidence
    assert f"PyTorch's gradients are {M} x the port's" in d018.evidence  # measured: M exactly (M a power of 2)
    assert f"not `loss / {M}`" in d018.fix and "accumulator.grads()" in d018.fix


def test_a_port_dividing_its_loss_by_m_is_named(port, torch_side, tmp_path):
    _, comparison, found = compared(port, torch_side, tmp_path, "sgd", "--bug", "loss-mean")
    assert not comparison.passed and "D018" in found
    assert f"divided by {M}, and so is its accumulated gradient" in found["D018"].evidence
    assert f"without the division by {M}" in found["D018"].fix


def test_a_port_without_accumulation_fails_with_one_structural_line(port, torch_side, tmp_path):
    trace, reference = torch_side("sgd")
    _, comparison, found = compared(port, torch_side, tmp_path, "sgd", "--bug", "none")
    assert not comparison.passed
    assert comparison.accumulation.startswith(f"gradient accumulation differs: A sums the gradients of {M} "
                                              "micro-batches")
    assert not comparison.only_in_a and not comparison.only_in_b  # the batch tensors are not listed one by one
    assert "D018" in found and f"with_accumulation({M})" in found["D018"].fix
    # the CLI: FAIL (exit 1), the line in the report, D018 in the JSON
    burn = tmp_path / "burn" / "accum_port.burn.safetensors"
    proc = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "compare", str(trace),
                           str(burn), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["accumulation"].startswith("gradient accumulation differs")
    assert "D018" in json.dumps(doc["diagnoses"] if "diagnoses" in doc else doc)
    proc = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "compare", str(trace),
                           str(burn)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "gradient accumulation differs" in proc.stdout and "Traceback" not in proc.stderr

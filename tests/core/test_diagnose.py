"""Diagnosis rules on traces recorded from real PyTorch runs that reproduce each failure."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from burnside.examples.a1 import a1_data, a1_f32_arithmetic_inputs, a1_model, record_torch
from burnside.pipeline import compare_with_evidence
from burnside.diagnose import diagnose
from burnside.torch import record
from burnside.trace import open_trace, write_trace

from .conftest import run_cli


def _batch():
    x, y = a1_data()
    return {"x": x, "y": y}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return record_torch(tmp_path_factory.mktemp("ref") / "sgd.safetensors", steps=2)


def _rules(a, b) -> dict:
    return {d.rule: d for d in diagnose(compare_with_evidence(open_trace(a), open_trace(b)))}


def test_d001_updates_that_never_land(tmp_path, reference):
    # The optimizer steps a copy: the recorded model keeps its parameters, as after a dropped step result.
    model = a1_model()
    opt = torch.optim.SGD(copy.deepcopy(model).parameters(), lr=0.1)
    stuck = record(model, opt, _batch(), tmp_path / "stuck.safetensors", steps=2)
    found = _rules(reference, stuck)
    assert "D001" in found
    assert "step 0, 1" in found["D001"].evidence
    assert "model = optim.step(lr, model, grads)" in found["D001"].fix


def test_d002_gradients_for_another_module(tmp_path, reference):
    model, other = a1_model(), a1_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    empty = record(model, opt, _batch(), tmp_path / "empty.safetensors", steps=2,
                   forward=lambda m, b: other(b["x"]))
    assert open_trace(empty).metadata["grads_len"] == [0, 0]
    found = _rules(reference, empty)
    assert "D002" in found and "step 0: 0 (vs 4)" in found["D002"].evidence
    assert "D001" not in found  # no gradient at all is D002's case, not a dropped update


def test_d003_optimizer_state_moves_without_the_model(tmp_path):
    adam = record_torch(tmp_path / "adam.safetensors", steps=3, optim="adam")
    model = a1_model()
    frozen = record(model, torch.optim.Adam(model.parameters(), lr=0.0, eps=1e-8), _batch(),
                    tmp_path / "frozen.safetensors", steps=3)
    found = _rules(adam, frozen)
    assert "D003" in found and "step count is 3" in found["D003"].evidence
    assert "D001" in found


def test_d004_adam_epsilon(tmp_path):
    adam = record_torch(tmp_path / "adam.safetensors", steps=2, optim="adam")
    model = a1_model()
    burn_default = record(model, torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-5), _batch(),
                          tmp_path / "eps.safetensors", steps=2)
    found = _rules(adam, burn_default)
    assert "with_epsilon(1e-08)" in found["D004"].fix
    assert "D005" not in found


def test_d005_momentum_dampening(tmp_path):
    model = a1_model()
    a = record(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), _batch(), tmp_path / "a.json")
    model = a1_model()
    b = record(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.1), _batch(),
               tmp_path / "b.json")
    found = _rules(a, b)
    assert "dampening" in found["D005"].evidence and "with_dampening" in found["D005"].fix


def test_d006_inputs_computed_in_f32(tmp_path, reference):
    model = a1_model()
    bad_x = torch.from_numpy(a1_f32_arithmetic_inputs()["x"])
    _, y = a1_data()
    f32 = record(model, torch.optim.SGD(model.parameters(), lr=0.1), {"x": bad_x, "y": y},
                 tmp_path / "f32.safetensors", steps=2)
    found = _rules(reference, f32)
    assert "inputs.x: 7 of 16 differ" in found["D006"].evidence


def test_d006_names_the_side_that_fed_step_0s_batch_again(tmp_path, reference):
    x, y = a1_data()
    batches = [{"x": x + k, "y": y} for k in range(2)]
    model = a1_model()
    per_step = record(model, torch.optim.SGD(model.parameters(), lr=0.1), batches,
                      tmp_path / "per-step.safetensors", steps=2)
    # the one-batch trace fed step 0's batch again at step 1, where the other fed a new one
    found = _rules(reference, per_step)
    assert found["D006"].evidence.startswith("B (pytorch) feeds a different batch at step 1; A (pytorch) fed step 0's "
                                             "batch again there: step1.inputs.x: 16 of 16 differ")
    assert found["D006"].fix == ("feed A (pytorch) the batch of each step, as B (pytorch) does "
                                 "(step 1's is `step1.inputs.*` in B (pytorch))")
    # the same inputs in f32 arithmetic on one side is no repeated batch: the generic fix stays
    assert "compute inputs and weights in f64" in _rules(reference, record(
        a1_model(), torch.optim.SGD(a1_model().parameters(), lr=0.1),
        {"x": torch.from_numpy(a1_f32_arithmetic_inputs()["x"]), "y": y}, tmp_path / "f32.safetensors",
        steps=2))["D006"].fix


def test_d007_burn_layout(tmp_path, reference):
    trace = open_trace(reference)
    tensors = {n: np.array(trace.array(n)) for n in trace.names}
    for n in list(tensors):
        if n.endswith("fc1.weight") and ".params_before." not in n:
            tensors[n] = np.ascontiguousarray(tensors[n].T)
    burn_layout = write_trace(tmp_path / "layout.safetensors", tensors, trace.metadata)
    found = _rules(reference, burn_layout)
    assert "step0.grads.fc1.weight (A [8, 4], B [4, 8])" in found["D007"].evidence


def test_cli_prints_the_diagnosis_with_its_fix(tmp_path, reference):
    model = a1_model()
    stuck = record(model, torch.optim.SGD(copy.deepcopy(model).parameters(), lr=0.1), _batch(),
                   tmp_path / "stuck.safetensors", steps=2)
    proc = run_cli("compare", str(reference), str(stuck))
    assert proc.returncode == 1
    assert "D001 optimizer step result discarded" in proc.stdout
    assert "first divergence: step0.params_after.fc1.weight" in proc.stdout


def test_compare_plots_loss_and_drift_per_step(tmp_path, reference):
    model = a1_model()
    stuck = record(model, torch.optim.SGD(copy.deepcopy(model).parameters(), lr=0.1), _batch(),
                   tmp_path / "stuck.safetensors", steps=2)
    png = tmp_path / "drift.png"
    proc = run_cli("compare", str(reference), str(stuck), "--plot", str(png))
    assert proc.returncode == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert proc.stderr.strip() == f"plot: {png}"


class _Pooled(torch.nn.Module):
    """Token ids -> Embedding -> mean (or, ported wrong, sum) over tokens -> Linear -> Tanh -> Linear."""

    def __init__(self, pool: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(20, 8)
        self.fc1 = torch.nn.Linear(8, 12)
        self.act = torch.nn.Tanh()
        self.fc2 = torch.nn.Linear(12, 4)
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        h = h.mean(dim=1) if self.pool == "mean" else h.sum(dim=1)
        return self.fc2(self.act(self.fc1(h)))


def test_a_forward_that_differs_between_two_recorded_layers_is_named_there(tmp_path):
    """The sum-for-mean bug sits between two modules: D010 names the layers around it."""
    torch.manual_seed(1)
    batch = {"x": torch.randint(0, 20, (6, 5)), "y": torch.randint(0, 4, (6,))}
    paths = {}
    for pool in ("mean", "sum"):
        model = _Pooled(pool)
        paths[pool] = record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, tmp_path / f"{pool}.json",
                             steps=1)
    ported = open_trace(paths["sum"])
    burn = write_trace(tmp_path / "burn.json", {n: np.array(ported.array(n)) for n in ported.names},
                       ported.metadata | {"framework": "burn"})
    comparison = compare_with_evidence(open_trace(paths["mean"]), open_trace(burn))
    found = {d.rule: d for d in diagnose(comparison)}
    assert comparison.first_divergence.name == "step0.activations.fc1"
    assert "D010" in found, sorted(found)
    assert "while the layer before it, emb, agrees" in found["D010"].evidence
    assert "something else between emb and fc1 (fc1 (Linear))" in found["D010"].evidence


def test_burns_adamw_epsilon_is_measured_under_decoupled_weight_decay(tmp_path):
    """`AdamWConfig::new()` (epsilon 1e-5) with weight decay, recorded as PyTorch's AdamW (1e-8): the step-0 fit
    takes the decay off the update first, so the epsilon is measured and named, not "no setting explains it"."""
    x, y = a1_data()

    def run(path, eps):
        model = a1_model()
        opt = torch.optim.AdamW(model.parameters(), lr=0.003, weight_decay=0.05, eps=eps)
        return open_trace(record(model, opt, {"x": x, "y": y}, path, steps=2))

    torch_side = run(tmp_path / "a.safetensors", 1e-8)
    burn = run(tmp_path / "b.safetensors", 1e-5)
    claims = write_trace(tmp_path / "claims.safetensors", {n: np.asarray(burn.array(n)) for n in burn.names},
                         {**burn.metadata, "framework": "burn", "optimizer": {**burn.optimizer, "eps": 1e-8}})
    found = {d.rule: d for d in diagnose(compare_with_evidence(torch_side, open_trace(claims)))}
    assert "D009" in found, sorted(found)
    assert "the trace says eps 1e-08; its updates show 1.00" in found["D009"].evidence


def test_hundreds_of_tensors_on_one_side_only_do_not_bury_the_verdict(tmp_path):
    from io import StringIO

    from rich.console import Console

    from burnside.report.table import render

    a = record_torch(tmp_path / "a.safetensors", steps=30, optim="sgd")
    trace = open_trace(a)
    kept = {n: np.asarray(trace.array(n)) for n in trace.names if ".fc2." not in n}
    b = write_trace(tmp_path / "b.safetensors", kept, {**trace.metadata, "framework": "burn"})
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    assert len(comparison.only_in_a) > 100
    out = StringIO()
    render(comparison, diagnose(comparison), Console(file=out, width=200, soft_wrap=True))  # as the CLI prints
    lines = out.getvalue().splitlines()
    # one line per stage: a count, the first three names, where the whole list is
    only = [line for line in lines if line.startswith("only in A:")]
    stages = {name.split(".")[1] for name in comparison.only_in_a}
    assert len(only) == len(stages) == 3, only
    per_step = len(comparison.only_in_a) // 3
    assert (f"only in A: {per_step} params_before tensors: step0.params_before.fc2.weight, "
            f"step0.params_before.fc2.bias, step1.params_before.fc2.weight and {per_step - 3} more (`--json` lists "
            "them all under only_in_a, the HTML report (--report) too)") in only
    assert sum(int(line.split()[3]) for line in only) == len(comparison.only_in_a)

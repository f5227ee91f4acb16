"""Adafactor, Muon and L-BFGS on both real sides of A1 (rust/a1's `train-step`, `torch.optim`), judged by the float64
reference; the porting bug of each failing with D005 and its fix."""

from __future__ import annotations

import numpy as np
import pytest

from burnside.examples.a1 import record_reference, record_torch
from burnside.burn.a1 import record_a1
from burnside.compare import open_reference
from burnside.diagnose import diagnose
from burnside.trace import open_trace
from tests.burn.test_optimizers import both_sides as _both_sides
from tests.burn.test_optimizers import run_cli

STEPS = 3


def both_sides(tmp_path, torch_optim: str, burn_optim: str | None = None):
    """The comparison of A1's PyTorch and burn traces over STEPS steps, by the reference."""
    return _both_sides(tmp_path, torch_optim, burn_optim, steps=STEPS)


@pytest.mark.parametrize(("optim", "slots", "rows"), [
    # matrices keep row and column means, vectors their full second moment; all a step count
    ("adafactor", {"row_var", "col_var", "variance", "step"}, 2 * 3 + 2 * 2),
    ("adafactor:weight_decay=0.1,d=2,beta2_decay=-0.5", {"row_var", "col_var", "variance", "step"}, 10),
    # Muon on the two weights: PyTorch's moving average, burn's momentum sum scaled to it
    ("muon", {"momentum_buffer"}, 2),
    ("muon:nesterov=false,momentum=0.9,weight_decay=0.0,ns_steps=3", {"momentum_buffer"}, 2),
    # one flat state for the whole model, recorded by neither side
    ("lbfgs", set(), 0),
    ("lbfgs:history_size=2,max_iter=4", set(), 0),
])
def test_burn_computes_pytorchs_update_for_the_same_settings(programs, tmp_path, optim, slots, rows):
    comparison = both_sides(tmp_path, optim)
    assert comparison.passed, [(r.name, r.stats.max_abs) for r in comparison.failed_rows]
    assert not comparison.only_in_a and not comparison.only_in_b and not comparison.structure
    assert {r.name.split(".")[2] for r in comparison.rows if r.stage == "optim"} == slots
    assert sum(r.stage == "optim" for r in comparison.rows) == STEPS * rows
    assert not diagnose(comparison)


def test_the_traces_describe_each_optimizer_with_pytorchs_settings(programs, tmp_path):
    described = {}
    for optim in ("adafactor", "muon", "lbfgs"):
        torch = open_trace(record_torch(tmp_path / f"t-{optim}.safetensors", steps=1, optim=optim))
        burn = open_trace(record_a1(tmp_path / f"b-{optim}.safetensors", steps=1, optim=optim))
        assert torch.optimizer == burn.optimizer, optim
        described[optim] = burn.optimizer
    assert described["adafactor"] == {
        "name": "adafactor", "lr": 0.01, "beta2_decay": -0.8, "eps1": float(np.finfo(np.float32).eps), "eps2": 1e-3,
        "d": 1.0, "weight_decay": 0.0, "weight_decay_kind": "decoupled", "relative_step": True,
        "scale_parameter": True, "maximize": False}
    assert described["muon"] == {
        "name": "muon", "lr": 0.02, "weight_decay": 0.1, "weight_decay_kind": "decoupled", "momentum": 0.95,
        "nesterov": True, "ns_coefficients": [3.4445, -4.775, 2.0315], "eps": 1e-7, "ns_steps": 5,
        "adjust_lr_fn": "match_rms_adamw"}
    assert described["lbfgs"] == {
        "name": "lbfgs", "lr": 0.1, "max_iter": 5, "max_eval": 6, "tolerance_grad": 1e-7, "tolerance_change": 1e-9,
        "history_size": 100, "line_search_fn": None, "maximize": False}


def test_a_setting_the_port_lacks_fails_and_d005_names_it(programs, tmp_path):
    comparison = both_sides(tmp_path, "adafactor:d=2", "adafactor")
    assert not comparison.passed
    d005 = [d for d in diagnose(comparison) if d.rule == "D005"]
    assert d005 and "d: pytorch 2.0, burn 1.0" in d005[0].evidence


@pytest.mark.parametrize("optim", ["adafactor", "muon", "lbfgs"])
def test_run_a1_with_each_optimizer_is_ok(programs, tmp_path, optim):
    proc = run_cli("run", "a1", "--optim", optim, "--steps", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " OK" in proc.stdout and "reference=" in proc.stdout
    # burn's Muon is judged by the burn-muon variant (its Newton-Schulz iteration in float32, PyTorch's in bfloat16)
    assert ("framework difference (B (burn), not the port): burn's Muon" in proc.stdout) == (optim == "muon")


@pytest.mark.parametrize(("bug", "optim", "evidence", "fix"), [
    ("muon-decay", "muon", ("weight_decay: pytorch 0.1, burn 0.0",),
     ("`MuonConfig::new().with_weight_decay(Some(WeightDecayConfig::new(0.1)))`",)),
    ("adafactor-absolute", "adafactor", ("relative_step: pytorch True, burn False",
                                         "scale_parameter: pytorch True, burn False"),
     ("`AdafactorConfig::new()` keeps `relative_step` and `scale_parameter` on",)),
    ("lbfgs-max-iter", "lbfgs", ("max_iter: pytorch 5, burn 20",), ("`LBFGSConfig::new().with_max_iter(..)`",)),
])
def test_each_optimizers_porting_bug_fails_with_d005_and_its_fix(programs, tmp_path, bug, optim, evidence, fix):
    proc = run_cli("run", "a1", "--bug", bug, "--optim", optim, "--steps", "3", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout and "D005 optimizer configuration differs" in proc.stdout
    for text in (*evidence, *fix):
        assert text in proc.stdout


def test_burns_muon_is_the_burn_muon_variant_of_the_reference(programs, tmp_path):
    """PyTorch's Muon runs Newton-Schulz in bfloat16, burn's in float32: the iteration does not converge, so the two
    first updates part by far more than rounding; each side is within rounding of its own float64 run."""
    torch = open_trace(record_torch(tmp_path / "t.safetensors", steps=STEPS, optim="muon"))
    burn = open_trace(record_a1(tmp_path / "b.safetensors", steps=STEPS, optim="muon"))
    path = record_reference(tmp_path / "r.safetensors", steps=STEPS, optim="muon")
    reference = open_trace(path)
    assert reference.metadata["variant.burn-muon"] == "r.burn-muon.safetensors"
    variant = open_reference(path).variants["burn-muon"]

    def far(side, judge, name):
        return float(np.abs(np.asarray(side.array(name), np.float64) - judge.array(name)).max())

    for name in ("step0.params_after.fc1.weight", f"step{STEPS - 1}.params_after.fc2.weight",
                 f"step{STEPS - 1}.logits"):
        assert far(burn, variant, name) < 1e-6 < far(burn, reference, name), name
        assert far(torch, reference, name) < 1e-6 < far(torch, variant, name), name

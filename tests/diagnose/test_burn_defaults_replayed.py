"""D009 on a loop written call by call that steps another optimizer than it declares, as a user's AdamW port did:

- a burn optimizer built with burn's own defaults (`AdamWConfig::new()`: epsilon 1e-5, weight decay 1e-4) while
  the recorder declares PyTorch's: two settings off at once, which the one-setting fits read as "no setting of that
  optimizer explains it". A replay with burn's defaults reproduces every update, and D009 names them;
- a constant rate given to `optim.step` while the recorder declares the warmup schedule: each step's rate is
  measured with AdamW's decoupled decay moving with it (it was fitted against the declared rate's decay, so no
  rate explained the steps and a false epsilon was named beside the lr), and the fix is the declared rate.

Both sides are real PyTorch runs recorded by `burnside.torch.record`; side B, marked burn, trains with what the port
computed and declares what the port's recorder declared.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace, write_trace
from tests.diagnose.forward_traces import as_burn

STEPS = 3


def _record(path: Path, schedule: bool, **settings) -> Path:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    generator = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
               for _ in range(STEPS)]
    warmup = (lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 3))) if schedule else None
    return record(model, torch.optim.AdamW(model.parameters(), lr=1e-2, **settings), batches, path, steps=STEPS,
                  lr_schedule=warmup)


def _declaring(path: Path, declared: dict) -> Path:
    """The port's trace declaring ``declared`` as its optimizer (what its recorder was told), marked burn's."""
    trace = open_trace(path)
    tensors = {n: np.array(trace.array(n)) for n in trace.names}
    write_trace(path, tensors, trace.metadata | {"optimizer": declared})
    return as_burn(path)


def test_a_burn_optimizer_built_with_burns_defaults_is_named_by_them(tmp_path):
    a = _record(tmp_path / "a.safetensors", False)
    b = _declaring(_record(tmp_path / "b.safetensors", False, eps=1e-5, weight_decay=1e-4),
                   open_trace(a).metadata["optimizer"])
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, b))}
    assert set(found) == {"D009"}, found
    assert "a replay with eps 1e-05, weight_decay 0.0001 reproduces every update, " \
           "where the trace declares eps 1e-08, " \
           "weight_decay 0.01: the burn optimizer was built with burn's default of eps, weight_decay" \
           in found["D009"].evidence, found["D009"].evidence
    assert "AdamWConfig::new().with_epsilon(1e-8).with_weight_decay(0.01)" in found["D009"].fix, found["D009"].fix


def test_a_constant_rate_under_a_declared_schedule_is_measured_step_by_step(tmp_path):
    a = _record(tmp_path / "a.safetensors", True)
    b = _declaring(_record(tmp_path / "b.safetensors", False), open_trace(a).metadata["optimizer"])
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, b))}
    assert set(found) == {"D009"}, found
    evidence = found["D009"].evidence
    assert "learning rate 0.01 at step 0 where the trace declares 0.003333" in evidence, evidence
    assert "learning rate 0.01 at step 1 where the trace declares 0.006667" in evidence, evidence
    assert "eps" not in evidence.split("declared adamw", 1)[1], evidence
    assert "the very rate the port declares for that step" in found["D009"].fix, found["D009"].fix


def test_a_schedule_that_returns_lambdalrs_factor_is_told_so(tmp_path):
    """The port's `with_lr_schedule` gives LambdaLR's factor (0.33, 0.67, 1) where PyTorch steps with the base rate
    times it: D005 says each burn rate is the PyTorch rate over the base rate, and to multiply."""
    a = _record(tmp_path / "a.safetensors", True)
    declared = open_trace(a).metadata["optimizer"]
    factors = [rate / declared["lr"] for rate in declared["lr_per_step"]]
    b = _declaring(_record(tmp_path / "b.safetensors", True), declared | {"lr_per_step": factors})
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, b))}
    assert "D005" in found, found
    assert "the schedule's factor, not the rate" in found["D005"].evidence, found["D005"].evidence
    assert "base_lr * factor(step)" in found["D005"].fix, found["D005"].fix


def test_a_constant_rate_recorded_at_every_step_is_no_schedule(tmp_path):
    """rust/README's call-by-call loop records `recorder.lr(k, lr)` at every step, a constant rate too: against a
    PyTorch loop without a scheduler that is the same optimizer (it was a D005 `lr_per_step` and a FAIL)."""
    a = _record(tmp_path / "a.safetensors", False)
    declared = open_trace(a).metadata["optimizer"]
    assert "lr_per_step" not in declared
    b = _declaring(_record(tmp_path / "b.safetensors", False), declared | {"lr_per_step": [declared["lr"]] * STEPS})
    comparison = compare_with_evidence(a, b)
    assert comparison.passed and not comparison.optimizer_differences, comparison.optimizer_differences
    assert not diagnose(comparison)
    # a rate that is not the base rate at some step is still a schedule
    c = _declaring(_record(tmp_path / "c.safetensors", False),
                   declared | {"lr_per_step": [declared["lr"]] * (STEPS - 1) + [declared["lr"] / 2]})
    assert "lr_per_step" in compare_with_evidence(a, c).optimizer_differences


def test_the_fewest_of_burns_defaults_that_reproduce_the_updates_are_named(tmp_path):
    """`RmsPropConfig::new().with_epsilon(1e-8)`: burn's momentum 0.9 kept, its eps set. The replay with burn's
    momentum alone reproduces the updates, so the momentum is named, not the eps the port did set."""
    def run(path: Path, **settings) -> Path:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
        generator = torch.Generator().manual_seed(1)
        batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
                   for _ in range(STEPS)]
        return record(model, torch.optim.RMSprop(model.parameters(), lr=1e-2, **settings), batches, path, steps=STEPS)

    a = run(tmp_path / "a.safetensors")
    b = run(tmp_path / "b.safetensors", momentum=0.9)
    trace = open_trace(b)
    tensors = {n: np.array(trace.array(n)) for n in trace.names}  # the momentum buffer burn's optimizer keeps too
    write_trace(b, tensors, trace.metadata | {"optimizer": open_trace(a).metadata["optimizer"]})
    from burnside.forensics.optimizer import measure_optimizer

    # the replay with burn's momentum alone reproduces the updates; with its eps too it would not
    assert measure_optimizer(open_trace(as_burn(b))).burn_defaults == ("rmsprop/burn-default-momentum",
                                                                       {"momentum": 0.9})
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, b))}
    # one setting off: the fit names it, measured
    assert "the trace says momentum 0; its updates show 0.9" in found["D009"].evidence, found["D009"].evidence
    assert "eps 1e-05" not in found["D009"].evidence

"""D009 measures each step's learning rate from the updates, for every optimizer whose replay has a step direction:
a port that changes its rate after step 0 (a decay written by hand, a schedule PyTorch's loop lacks) and declares
none is told which rate each step applied, and that the trace declares another. Before, only Adam and AdamW were:
an SGD port got "no setting of that optimizer explains it (gradient clipping, ...)", and RMSprop and Adagrad ports
got a false cause, the eps or lr_decay that the fit over every step at once read the rate change as. A port stepping
with another rate at every step is told its lr, where RMSprop and Adagrad were told an eps (and a decay).

Both sides are real PyTorch runs recorded by `burnside.torch.record`; the port side, marked burn, steps with half
the declared learning rate, from step 1 on or at every step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace
from tests.diagnose.forward_traces import as_burn, lr_from_step_1

STEPS = 3
OPTIMIZERS = {
    "sgd": (0.1, lambda params, lr: torch.optim.SGD(params, lr=lr)),
    "sgd-momentum": (0.1, lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9)),
    "sgd-weight-decay": (0.1, lambda params, lr: torch.optim.SGD(params, lr=lr, weight_decay=0.01)),
    "rmsprop": (0.01, lambda params, lr: torch.optim.RMSprop(params, lr=lr)),
    "rmsprop-momentum": (0.01, lambda params, lr: torch.optim.RMSprop(params, lr=lr, momentum=0.5)),
    "adagrad": (0.1, lambda params, lr: torch.optim.Adagrad(params, lr=lr)),
    "adagrad-lr-decay": (0.1, lambda params, lr: torch.optim.Adagrad(params, lr=lr, lr_decay=0.1)),
    "adam": (0.01, lambda params, lr: torch.optim.Adam(params, lr=lr)),
}


def _record(path: Path, optimizer: str, halve: str | None) -> Path:
    lr, build = OPTIMIZERS[optimizer]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = build(model.parameters(), lr)
    if halve == "from step 1":
        lr_from_step_1(model, opt, lr / 2)
    elif halve == "always":  # set before every forward pass: the trace still declares the rate it was built with
        model.register_forward_pre_hook(lambda *_: opt.param_groups[0].__setitem__("lr", lr / 2))
    generator = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
               for _ in range(STEPS)]
    return record(model, opt, batches, path, steps=STEPS)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_a_rate_halved_after_step_0_is_measured_at_each_step(tmp_path, optimizer):
    lr = OPTIMIZERS[optimizer][0]
    comparison = compare_with_evidence(_record(tmp_path / "a.safetensors", optimizer, None),
                                       as_burn(_record(tmp_path / "b.safetensors", optimizer, "from step 1")))
    found = {d.rule: d for d in diagnose(comparison)}
    assert not comparison.passed
    assert "D009" in found, sorted(found)
    evidence = found["D009"].evidence
    assert "from step 1" in evidence, evidence
    said = f"{lr:.4g}"
    assert evidence.endswith(f"its updates show learning rate {lr / 2:.4g} at step 1 where the trace declares "
                             f"{said}, learning rate {lr / 2:.4g} at step 2 where the trace declares {said}"), evidence
    assert "with_lr_schedule" in found["D009"].fix


@pytest.mark.parametrize("optimizer", ["sgd", "rmsprop", "adagrad", "adam"])
def test_another_rate_at_every_step_is_named_as_the_lr(tmp_path, optimizer):
    lr = OPTIMIZERS[optimizer][0]
    comparison = compare_with_evidence(_record(tmp_path / "a.safetensors", optimizer, None),
                                       as_burn(_record(tmp_path / "b.safetensors", optimizer, "always")))
    found = {d.rule: d for d in diagnose(comparison)}
    assert "D009" in found, sorted(found)
    evidence = found["D009"].evidence
    assert "from step 0" in evidence, evidence
    assert evidence.endswith(f"the trace says lr {lr:g}; its updates show {lr / 2:g}"), evidence
    assert "configure the burn optimizer with the PyTorch values" in found["D009"].fix


def test_an_sgd_ports_undeclared_clipping_is_named_as_clipping_not_as_rates(tmp_path):
    """Plain SGD's update is linear in the gradient, so a joint-norm clipping the trace does not declare shows as
    another rate at each step: the rates follow the gradient norms, min(1, c / |g_k|), and D009 names the clipping
    at that c, not a schedule."""
    from tests.core.test_clipping import _norm0, _record as record_a1, _relabel

    clip = _norm0() / 4
    clipped = record_a1(tmp_path / "c.safetensors", clip=clip, optim="sgd", lr=0.1)
    unclipped = record_a1(tmp_path / "u.safetensors", clip=None, optim="sgd", lr=0.1)
    silent = _relabel(clipped, tmp_path / "silent.safetensors", clip_grad_norm=None)
    found = {d.rule: d for d in diagnose(compare_with_evidence(open_trace(unclipped), silent))}
    assert "D009" in found, sorted(found)
    evidence = found["D009"].evidence
    assert "the trace says no clipping; its updates show gradients scaled to a joint norm of" in evidence, evidence
    shown = float(evidence.rsplit(" ", 1)[1])
    assert shown == pytest.approx(clip, rel=1e-3)
    assert "learning rate" not in evidence and "clip_grad_norm_" in found["D009"].fix


def _warmup(shift: int):
    """A Noam-style warmup-then-decay schedule as LambdaLR's factor, evaluated ``shift`` steps ahead of the step."""
    def factor(k: int) -> float:
        step = max(k + shift + 1, 1)
        return min(step ** -0.5, step * 3 ** -1.5)
    return lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, factor)


@pytest.mark.parametrize("shift", [1, -1])
def test_a_schedule_counted_a_step_off_is_named_as_an_offset(tmp_path, shift):
    def run(path: Path, schedule) -> Path:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
        generator = torch.Generator().manual_seed(1)
        batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
                   for _ in range(4)]
        return record(model, torch.optim.Adam(model.parameters(), lr=0.01), batches, path, steps=4,
                      lr_schedule=schedule)

    a = run(tmp_path / "a.safetensors", _warmup(0))
    b = as_burn(run(tmp_path / "b.safetensors", _warmup(shift)))
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, b))}
    assert "D005" in found, sorted(found)
    ahead = "ahead" if shift > 0 else "behind"
    assert f"each step k's burn rate pytorch's rate at step k {'+' if shift > 0 else '-'} 1: the same schedule, " \
           f"counted 1 step {ahead}" in found["D005"].evidence, found["D005"].evidence
    assert "evaluate the schedule at the step PyTorch's does" in found["D005"].fix, found["D005"].fix
    assert "apply the PyTorch loop's learning-rate schedule" not in found["D005"].fix, found["D005"].fix

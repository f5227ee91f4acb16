"""An optimizer burnside cannot describe (a torch.optim.Optimizer subclass with a step of its own) on real PyTorch
runs: recorded with what its groups say and its class, never judged as another optimizer, re-run by the float64
reference when its constructor allows, and one line where it does not."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace


class Lion(torch.optim.Optimizer):
    """The sign of an interpolated momentum (Chen et al. 2023), as a user writes it."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                p.add_(torch.sign(m * b1 + p.grad * (1 - b1)), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


class NeedsScale(Lion):
    def __init__(self, params, lr, *, scale):
        super().__init__(params, lr=lr)
        self.scale = scale


def _run(path, optimizer=Lion, lr=1e-2, **kwargs):
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = optimizer(model.parameters(), lr=lr, **({"scale": 2.0} if optimizer is NeedsScale else {}))
    batch = {"x": torch.randn(8, 4, generator=torch.Generator().manual_seed(1)),
             "y": torch.tensor([0, 1, 2] * 2 + [0, 1])}
    return record(model, opt, batch, path, steps=3, **kwargs)


def test_a_custom_optimizer_is_recorded_as_read_and_not_judged_as_another(tmp_path):
    a = _run(tmp_path / "a.safetensors", reference=tmp_path / "ref.safetensors")
    assert open_trace(a).optimizer == {"name": "lion", "class": "Lion", "lr": 0.01, "weight_decay": 0.0,
                                       "betas": [0.9, 0.99]}
    same = compare_with_evidence(open_trace(a), open_trace(_run(tmp_path / "b.safetensors")),
                                 reference=tmp_path / "ref.safetensors")
    assert same.passed and not diagnose(same)
    # another lr: a real difference, compared as recorded, with no optimizer diagnosis pretending to know Lion
    other = compare_with_evidence(open_trace(a), open_trace(_run(tmp_path / "c.safetensors", lr=2e-2)),
                                  reference=tmp_path / "ref.safetensors")
    assert not other.passed
    assert not [d for d in diagnose(other) if d.rule in ("D004", "D005", "D009")]


def test_a_custom_optimizer_the_reference_cannot_rebuild_is_one_line(tmp_path):
    with pytest.raises(BurnsideError) as caught:
        _run(tmp_path / "a.safetensors", optimizer=NeedsScale, reference=tmp_path / "ref.safetensors")
    message = str(caught.value)
    assert "\n" not in message and "cannot rebuild the optimizer NeedsScale" in message
    assert "record without reference=" in message
    assert not list(tmp_path.iterdir()), "nothing written"

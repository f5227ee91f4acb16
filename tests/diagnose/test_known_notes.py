"""The known burn differences a diagnosis adds to its fix (`burnside.catalogue.note_for`) are the ones that can be
its cause. A user's AdamW port got "burn's AdamWConfig defaults to epsilon 1e-5 and weight decay 1e-4" after every
D005, its betas or its schedule, although it declared PyTorch's epsilon and weight decay.

Both sides are real PyTorch runs of one MLP; side B, marked as burn's, trains with the port's settings.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from tests.diagnose.forward_traces import as_burn

NOTE = "AdamWConfig defaults to epsilon 1e-5 and weight decay 1e-4"


def _d005(tmp_path, **port):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    batch = {"x": torch.randn(5, 6), "y": torch.randint(0, 3, (5,))}
    port_model = copy.deepcopy(model)
    a = record(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batch, tmp_path / "a.safetensors", steps=2)
    b = record(port_model, torch.optim.AdamW(port_model.parameters(), lr=1e-3, **port), batch,
               tmp_path / "b.safetensors", steps=2)
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, as_burn(b)))}
    assert "D005" in found, found
    return found["D005"]


def test_a_port_declaring_pytorchs_epsilon_and_decay_is_not_told_burns_defaults(tmp_path):
    d005 = _d005(tmp_path, betas=(0.9, 0.99))
    assert "betas: pytorch [0.9, 0.999], burn [0.9, 0.99]" in d005.evidence, d005.evidence
    assert ".with_betas(beta_1, beta_2)" in d005.fix, d005.fix
    assert NOTE not in d005.fix, d005.fix


def test_a_port_declaring_burns_default_epsilon_is_told_it(tmp_path):
    d005 = _d005(tmp_path, betas=(0.9, 0.99), eps=1e-5)
    assert NOTE in d005.fix, d005.fix

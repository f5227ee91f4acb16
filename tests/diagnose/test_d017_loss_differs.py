"""D017: the loss each side computed, measured from its own recorded logits and targets (both sides real PyTorch)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record


def _run(path, loss_fn, regression: bool, pad: bool = False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(3):
        x = torch.randn(12, 6, generator=g)
        y = torch.randn(12, 4, generator=g) * 2 if regression else torch.randint(0, 4, (12,), generator=g)
        if pad:
            y[:3] = 0
        batches.append({"x": x, "y": y})
    return record(model, opt, batches, path, loss_fn=loss_fn)


CASES = {
    "smoothing": (lambda o, y: F.cross_entropy(o, y, label_smoothing=0.1), F.cross_entropy, False, False,
                  "label smoothing 0.1", "with_smoothing(Some(0.1))"),
    "ignore_index": (lambda o, y: F.cross_entropy(o, y, ignore_index=0), F.cross_entropy, False, True,
                     "ignoring target 0", "with_pad_tokens(Some(vec![0]))"),
    "huber_delta": (lambda o, y: F.smooth_l1_loss(o, y, beta=0.5), lambda o, y: F.huber_loss(o, y, delta=0.5), True,
                    False, "SmoothL1 with beta 0.5", "SmoothL1LossConfig::new().with_beta(0.5)"),
    "mse_sum": (F.mse_loss, lambda o, y: F.mse_loss(o, y, reduction="sum"), True, False, "MSE (mean)",
                "Reduction::Mean"),
    "smooth_l1_beta": (lambda o, y: F.smooth_l1_loss(o, y, beta=2.0), F.smooth_l1_loss, True, False,
                       "SmoothL1 with beta 2", "with_beta(2.0)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_loss_named_from_the_numbers(case: str, tmp_path) -> None:
    loss_a, loss_b, regression, pad, named, burn = CASES[case]
    a = _run(tmp_path / "a.safetensors", loss_a, regression, pad)
    b = _run(tmp_path / "b.safetensors", loss_b, regression, pad)
    comparison = compare_with_evidence(a, b)
    assert comparison.first_divergence.name == "step0.loss"
    found = diagnose(comparison)
    assert [d.rule for d in found] == ["D017"], [(d.rule, d.evidence) for d in found]
    assert named in found[0].evidence and burn in found[0].fix, found[0]


def test_bce_with_logits_against_mse(tmp_path) -> None:
    def targets(o, y):
        return (y > 0).float()
    a = _run(tmp_path / "a.safetensors", lambda o, y: F.binary_cross_entropy_with_logits(o, targets(o, y)), True)
    b = _run(tmp_path / "b.safetensors", lambda o, y: F.mse_loss(o, targets(o, y)), True)
    # the targets the losses read are not the recorded y, but what each loss function was given is recorded
    found = diagnose(compare_with_evidence(a, b))
    assert [d.rule for d in found] == ["D017"]
    assert "BCE-with-logits (mean)" in found[0].evidence and "MSE (mean)" in found[0].evidence
    assert "recomputed from what its loss function was given" in found[0].evidence


def test_class_weights_named_when_only_a_weighting_explains_it(tmp_path) -> None:
    weight = torch.tensor([1.0, 2.0, 0.5, 3.0])
    a = _run(tmp_path / "a.safetensors", F.cross_entropy, False)
    b = _run(tmp_path / "b.safetensors", lambda o, y: F.cross_entropy(o, y, weight=weight), False)
    found = diagnose(compare_with_evidence(a, b))
    assert [d.rule for d in found] == ["D017"]
    assert "class weights, or logits paired with other targets" in found[0].evidence and "with_weights" in found[0].fix


def test_sum_over_the_batch_is_left_to_d010(tmp_path) -> None:
    a = _run(tmp_path / "a.safetensors", F.cross_entropy, False)
    b = _run(tmp_path / "b.safetensors", lambda o, y: F.cross_entropy(o, y, reduction="sum"), False)
    found = diagnose(compare_with_evidence(a, b))
    assert [d.rule for d in found] == ["D010"] and "batch size 12" in found[0].evidence

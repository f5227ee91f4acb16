"""The burn-adam variant of a float64 reference with parameter groups: recorded, each group with its own settings."""

from __future__ import annotations

import numpy as np
import torch

from burnside.examples.a1 import a1_data, a1_model
from burnside.compare import open_reference
from burnside.recording.reference import has_burn_adam_variant, record_reference
from burnside.trace import open_trace


def groups_optimizer(model, kind=torch.optim.AdamW, **extra):
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return kind([{"params": weights, "weight_decay": 0.1},
                 {"params": biases, "weight_decay": 0.0, "lr": 0.05, "betas": (0.8, 0.99)}], lr=0.01, **extra)


def test_a_grouped_adamw_reference_records_the_burn_adam_variant_with_each_groups_settings(tmp_path):
    model = a1_model()
    x, y = a1_data()
    optimizer = groups_optimizer(model)
    assert has_burn_adam_variant(optimizer)
    path = record_reference(model, optimizer, {"x": x, "y": y}, tmp_path / "r.safetensors", steps=3)
    assert open_trace(path).metadata["variant.burn-adam"] == "r.burn-adam.safetensors"
    variant = open_reference(path).variants["burn-adam"]
    plain = open_trace(path)
    # burn's f32 constants move each parameter by a float32 rounding or so; another group's lr or betas by far more
    for name in ("fc1.weight", "fc1.bias", "fc2.bias"):
        key = f"step2.params_after.{name}"
        assert np.abs(variant.array(key) - plain.array(key)).max() < 1e-6, name
    moved = np.abs(plain.array("step2.params_after.fc2.bias") - plain.array("step0.params_before.fc2.bias")).max()
    assert moved > 0.1  # the bias group's lr 0.05 (three Adam steps of ~lr each), not the first group's 0.01


def test_amsgrad_in_any_group_has_the_variant_keeping_its_maximum(tmp_path):
    """burn's AMSGrad divides by the running maximum of moment_2 as PyTorch's does, with its f32 constants: the
    variant keeps that maximum (slot max_exp_avg_sq) for the amsgrad group only, never below moment_2."""
    model = a1_model()
    x, y = a1_data()
    optimizer = groups_optimizer(model, torch.optim.Adam)
    optimizer.param_groups[1]["amsgrad"] = True
    assert has_burn_adam_variant(optimizer)
    path = record_reference(model, optimizer, {"x": x, "y": y}, tmp_path / "r.safetensors", steps=3)
    variant = open_reference(path).variants["burn-adam"]
    for name in ("fc1.weight", "fc2.weight"):
        assert f"step2.optim.max_exp_avg_sq.{name}" not in variant
    for name in ("fc1.bias", "fc2.bias"):
        for k in range(3):
            peak = variant.array(f"step{k}.optim.max_exp_avg_sq.{name}")
            assert (peak >= variant.array(f"step{k}.optim.exp_avg_sq.{name}")).all()
        assert np.array_equal(variant.array(f"step0.optim.max_exp_avg_sq.{name}"),
                              variant.array(f"step0.optim.exp_avg_sq.{name}"))

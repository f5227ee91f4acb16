"""Diagnoses on traces holding some tensors as statistics only (format version 3): the rules read full tensors, so
where the sides part in a statistics tensor before anything compared in full shows it, D020 names where (the step,
the tensor, the part of the step) and what to record in full, in place of a cause read off a later full tensor.

Both sides are real PyTorch runs recorded by `burnside.torch.record` with `full_steps` / `layer_statistics`, the port
side marked burn; the bug is built into the port side's loop. A real burn port's case is in
tests/burn/test_statistics_rust.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.report.table import divergence_text
from burnside.torch import record
from burnside.trace import open_trace, write_trace
from burnside.trace.statistics import statistics_of
from tests.diagnose.forward_traces import as_burn
from tests.diagnose.forward_traces import lr_from_step_1 as set_lr_from_step_1


class _Net(nn.Module):
    def __init__(self, eps: float) -> None:
        super().__init__()
        self.fc1, self.ln, self.fc2 = nn.Linear(4, 16), nn.LayerNorm(16, eps=eps), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.ln(self.fc1(x))))


def _record(path: Path, *, eps: float = 1e-5, lr_from_step_1: float | None = None, steps: int = 2,
            **options) -> Path:
    torch.manual_seed(0)
    model = _Net(eps)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    if lr_from_step_1 is not None:  # the port's learning rate changes after step 0 (a schedule PyTorch lacks)
        set_lr_from_step_1(model, opt, lr_from_step_1)
    generator = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
               for _ in range(steps)]
    return record(model, opt, batches, path, steps=steps, **options)


def _pair(tmp_path: Path, a: dict, b: dict):
    comparison = compare_with_evidence(_record(tmp_path / "a.safetensors", **a),
                                       as_burn(_record(tmp_path / "b.safetensors", **a, **b)))
    return comparison, diagnose(comparison)


def test_a_layer_recorded_as_statistics_is_named_in_place_of_the_logits(tmp_path):
    """A LayerNorm epsilon under `layer_statistics=True` (the default for a large model): the layer's statistics
    prove its output apart, and D020 names it with `layer_statistics=False`; D010 read the full logits alone as
    "the forward computes something else"."""
    comparison, found = _pair(tmp_path, {"layer_statistics": True}, {"eps": 1e-3})
    assert [d.rule for d in found] == ["D020"], [(d.rule, d.evidence) for d in found]
    evidence, fix = found[0].evidence, found[0].fix
    assert "step0.activations.ln (LayerNorm)" in evidence and "the forward pass is the first part" in evidence
    assert "proven from the statistics" in evidence and "step0.logits" in evidence
    assert "`layer_statistics=False`" in fix and "full_steps" not in fix
    assert "tensors recorded as statistics part before it, from step0.activations.ln" in divergence_text(
        comparison, comparison.first_divergence)


def test_the_same_layer_recorded_in_full_is_measured(tmp_path):
    _, found = _pair(tmp_path, {}, {"eps": 1e-3})
    assert [d.rule for d in found] == ["D011"]


def test_a_faithful_port_with_layers_and_steps_as_statistics_passes_with_no_diagnosis(tmp_path):
    comparison, found = _pair(tmp_path, {"layer_statistics": True, "steps": 4, "full_steps": [0, -1]}, {})
    assert comparison.passed and comparison.statistics and not found


def test_a_bug_first_acting_in_a_statistics_step_is_not_read_off_the_next_full_loss(tmp_path):
    """The port's learning rate changes after step 0, and step 1 is statistics only: its update is proven apart.
    step2.loss (a 0-d scalar, always full) is the first full tensor out of tolerance; D010 read it against step 2's
    unrecorded logits as "the loss function differs"."""
    comparison, found = _pair(tmp_path, {"steps": 4, "full_steps": [0, -1]}, {"lr_from_step_1": 0.005})
    assert comparison.first_divergence_name == "step2.loss"
    assert [d.rule for d in found] == ["D020"], [(d.rule, d.evidence) for d in found]
    assert "step1.params_after" in found[0].evidence and "the update is the first part" in found[0].evidence
    assert "`full_steps=[0, 1, 3]`" in found[0].fix


def test_a_full_tensor_after_unjudged_statistics_of_its_step_is_no_cause(tmp_path):
    """step 1's logits (statistics) one ulp apart, which statistics cannot tell from rounding, and its loss (full)
    out of tolerance: whether the logits agree is not known, so no rule names the loss function."""
    a = _record(tmp_path / "a.safetensors", steps=3, full_steps=[0, -1])
    full = open_trace(_record(tmp_path / "full.safetensors", steps=3))
    tensors = {n: np.array(full.array(n)) for n in full.names}
    tensors["step1.logits"] = np.nextafter(tensors["step1.logits"], np.float32(np.inf), dtype=np.float32)
    tensors["step1.loss"] = tensors["step1.loss"] + np.float32(1e-3)
    # step 1 as the recorder holds it under full_steps=[0, -1]: each tensor that may be statistics, as statistics
    held = open_trace(a).statistics
    statistics = {n: statistics_of(tensors.pop(n), held[n].dtype) for n in list(tensors) if n in held}
    b = write_trace(tmp_path / "b.safetensors", tensors, open_trace(a).metadata | {"framework": "burn"},
                    statistics=statistics)
    comparison = compare_with_evidence(a, b)
    found = diagnose(comparison)
    assert comparison.first_divergence_name == "step1.loss"
    assert [d.rule for d in found] == ["D020"], [(d.rule, d.evidence) for d in found]
    assert found[0].evidence.startswith("step1.loss is out of tolerance, and before it step 1's tensors recorded as "
                                        "statistics only differ from step1.logits on")
    assert "`full_steps=[0, 1, 2]`" in found[0].fix

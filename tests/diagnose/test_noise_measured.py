"""A layer output the float64 reference's noise band holds, whose layer is configured otherwise all the same, on
real PyTorch runs: a LayerNorm's epsilon 1e-6 against 1e-5 on inputs of variance ~10 moves the norm's output
about 11 times further from the reference than float32 rounding, inside the band (32 times the other side's).
The layer's settings measured on each side from its input and output differ, so the row is a real difference
and D011 names it; the faithful port stays OK."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record_forward
from burnside.trace import open_trace, write_trace


class Net(nn.Module):
    def __init__(self, eps: float) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.norm = nn.LayerNorm(32, eps=eps)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(3.0 * self.fc(x)))


def _record(path, eps, **kwargs):
    torch.manual_seed(0)
    batches = [{"x": torch.randn(8, 16, generator=torch.Generator().manual_seed(1))}]
    return record_forward(Net(eps), batches, path, **kwargs)


def _as_port(tmp_path, path):
    """PyTorch's trace rewritten as a burn port's: no layer inputs, burn's framework."""
    trace = open_trace(path)
    meta = {k: v for k, v in trace.metadata.items() if k not in ("layer_inputs", "modules", "activations")}
    return write_trace(tmp_path / "port.safetensors",
                       {n: np.asarray(trace.array(n)) for n in trace.names if ".layer_inputs." not in n},
                       {**meta, "framework": "burn", "framework_version": "0.22.1"})


def test_a_norm_epsilon_inside_the_noise_band_is_measured_and_named(tmp_path):
    a = _record(tmp_path / "a.safetensors", 1e-5, reference=tmp_path / "ref.safetensors")
    b = _as_port(tmp_path, _record(tmp_path / "b.safetensors", 1e-6))
    comparison = compare_with_evidence(open_trace(a), open_trace(b), reference=tmp_path / "ref.safetensors")
    norm = next(r for r in comparison.rows if r.name == "step0.activations.norm")
    assert norm.ref.dist_b < 32 * norm.ref.dist_a, "the case is one the noise band holds"
    assert norm.ref.overruled and "epsilon" in norm.ref.overruled
    assert not comparison.passed and comparison.first_divergence.name == "step0.activations.norm"
    found = diagnose(comparison)
    assert [d.rule for d in found] == ["D011"], [d.rule for d in found]
    assert "epsilon measured 1e-5 on A (pytorch), 1e-6 on B (burn)" in found[0].evidence


def test_the_faithful_port_is_ok(tmp_path):
    a = _record(tmp_path / "a.safetensors", 1e-5, reference=tmp_path / "ref.safetensors")
    b = _as_port(tmp_path, _record(tmp_path / "b.safetensors", 1e-5))
    comparison = compare_with_evidence(open_trace(a), open_trace(b), reference=tmp_path / "ref.safetensors")
    assert comparison.passed and not diagnose(comparison)

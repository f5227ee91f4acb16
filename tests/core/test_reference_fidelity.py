"""The float64 reference computes the float32 loop's arithmetic in float64: constants read from the dtype pinned.

A float64 copy of a model whose RMSNorm has ``eps=None`` (or whose code reads ``torch.finfo(x.dtype).eps``, or calls
``F.rms_norm`` without an epsilon) takes float64's epsilon, 2.2e-16, where the float32 loop takes 1.19e-7. On small
activations the copy's norm is then far from the loop's (measured here on the unpinned copy), the reference's noise
band is that wide, and a port whose epsilon is 1e-6 passes as rounding noise. With the constants pinned, the
reference is within float32 rounding of the loop and the same port FAILs at the norm.
"""

from __future__ import annotations

import copy
import json
from io import StringIO

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from torch import nn
from rich.console import Console
from torch.nn import functional as F

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.report.json_report import comparison_json
from burnside.report.table import render
from burnside.trace import open_trace
from burnside.torch import record, record_forward

STEPS = 2
WIDTH = 16


class _Norm(nn.Module):
    """An RMS norm of one of three kinds, each reading its epsilon from the dtype when ``eps`` is None."""

    def __init__(self, kind: str, eps: float | None) -> None:
        super().__init__()
        self.kind, self.eps = kind, eps
        self.weight = nn.Parameter(torch.ones(WIDTH))
        self.module = nn.RMSNorm(WIDTH, eps=eps) if kind == "module" else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.kind == "module":
            return self.module(h)
        if self.kind == "functional":
            return F.rms_norm(h, (WIDTH,), self.weight, eps=self.eps)
        eps = self.eps if self.eps is not None else torch.finfo(h.dtype).eps  # a hand-written RMSNorm
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * self.weight


class _Net(nn.Module):
    def __init__(self, kind: str, eps: float | None) -> None:
        super().__init__()
        self.fc = nn.Linear(8, WIDTH)
        self.norm = _Norm(kind, eps)
        self.out = nn.Linear(WIDTH, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(self.fc(x)))


def _loop(kind: str, eps: float | None) -> tuple[nn.Module, torch.optim.Optimizer, list[dict]]:
    """The same untrained model and batches on every call; small inputs, so the norm's epsilon matters."""
    torch.manual_seed(0)
    model = _Net(kind, eps)
    with torch.no_grad():
        model.fc.weight.mul_(1e-3)
        model.fc.bias.mul_(1e-3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(16, 8, generator=generator), "y": torch.randint(0, 4, (16,), generator=generator)}
               for _ in range(STEPS)]
    return model, opt, batches


def _relative(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - ref).max() / np.abs(ref).max())


KINDS = ["module", "functional", "finfo"]


@pytest.mark.parametrize("kind", KINDS)
def test_reference_is_within_float32_rounding_of_the_loop(kind: str, tmp_path) -> None:
    model, opt, batches = _loop(kind, None)
    unpinned = copy.deepcopy(model).double()
    with torch.no_grad():
        loop_norm = model.norm(model.fc(batches[0]["x"])).double()
        naive = float((unpinned.norm(unpinned.fc(batches[0]["x"].double())) - loop_norm).abs().max()
                      / loop_norm.abs().max())
    record(model, opt, batches, tmp_path / "a.safetensors", reference=tmp_path / "ref.safetensors")
    a, ref = load_file(tmp_path / "a.safetensors"), load_file(tmp_path / "ref.safetensors")
    name = "step0.activations.norm"
    pinned = _relative(a[name], ref[name])
    assert naive > 1e-3, naive  # what a plain float64 copy computes: another epsilon, far outside rounding
    assert pinned < 1e-6, pinned  # float32 rounding of the loop's own arithmetic
    assert _relative(a["step1.logits"], ref["step1.logits"]) < 1e-5
    assert torch.finfo is torch.finfo(torch.float32).__class__  # torch.finfo is itself again
    meta = open_trace(tmp_path / "ref.safetensors").metadata
    assert {"module": "norm.module.eps (RMSNorm eps=None)", "functional": "rms_norm(eps=None)",
            "finfo": "torch.finfo(float64) at test_reference_fidelity.py"}[kind] in meta["pinned"]
    assert "unpinned" not in meta


@pytest.mark.parametrize("kind", KINDS)
def test_port_with_another_epsilon_fails_at_the_norm(kind: str, tmp_path) -> None:
    """The port's RMSNorm epsilon is 1e-6 (side B, recorded by PyTorch with that epsilon): a real difference."""
    model, opt, batches = _loop(kind, None)
    record(model, opt, batches, tmp_path / "a.safetensors", reference=tmp_path / "ref.safetensors")
    record(*_loop(kind, 1e-6), tmp_path / "b.safetensors")
    comparison = compare_with_evidence(tmp_path / "a.safetensors", tmp_path / "b.safetensors",
                                       reference=tmp_path / "ref.safetensors")
    assert not comparison.passed
    assert comparison.first_divergence.name.startswith("step0.activations.norm")
    assert diagnose(comparison), "a FAIL names its cause"
    # the same loop against itself with the reference: OK
    record(*_loop(kind, None), tmp_path / "a2.safetensors")
    same = compare_with_evidence(tmp_path / "a.safetensors", tmp_path / "a2.safetensors",
                                 reference=tmp_path / "ref.safetensors")
    assert same.passed and not diagnose(same)
    # the verdict and the JSON say what the reference pinned
    assert same.reference_pinned == open_trace(tmp_path / "ref.safetensors").metadata["pinned"]
    out = StringIO()
    render(same, [], Console(file=out, width=400))
    assert f"float64 reference: float32's constants kept, as the loop computes them: {same.reference_pinned}" in \
        out.getvalue()
    assert json.loads(comparison_json(same, []))["reference_pinned"] == same.reference_pinned


@pytest.mark.parametrize("kind", KINDS)
def test_forward_reference_pins_the_same_constants(kind: str, tmp_path) -> None:
    model, _, batches = _loop(kind, None)
    inputs = [{"x": b["x"]} for b in batches]
    record_forward(model, inputs, tmp_path / "a.safetensors", reference=tmp_path / "ref.safetensors")
    a, ref = load_file(tmp_path / "a.safetensors"), load_file(tmp_path / "ref.safetensors")
    assert _relative(a["step0.activations.norm"], ref["step0.activations.norm"]) < 1e-6
    assert open_trace(tmp_path / "ref.safetensors").metadata["pinned"]
    other, _, _ = _loop(kind, 1e-6)
    record_forward(other, inputs, tmp_path / "b.safetensors")
    comparison = compare_with_evidence(tmp_path / "a.safetensors", tmp_path / "b.safetensors",
                                       reference=tmp_path / "ref.safetensors")
    assert not comparison.passed
    assert comparison.first_divergence.name.startswith("step0.activations.norm")


class _Projected(nn.Module):
    """A forward through `torch.linalg.pinv` with its default tolerance (float64's in a float64 run)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) @ torch.linalg.pinv(self.fc.weight)


def test_a_constant_out_of_reach_is_named_unpinned(tmp_path) -> None:
    torch.manual_seed(0)
    model = _Projected()
    record_forward(model, {"x": torch.randn(3, 4)}, tmp_path / "a.safetensors", reference=tmp_path / "ref.safetensors")
    meta = open_trace(tmp_path / "ref.safetensors").metadata
    assert "torch.linalg.pinv" in meta["unpinned"]
    assert "pinned" not in meta


class _Raising(_Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.finfo(x.dtype)
        raise ValueError("the model's own error")


def test_torch_finfo_is_put_back_when_the_run_fails(tmp_path) -> None:
    torch.manual_seed(0)
    model = _Raising("finfo", None)
    with pytest.raises(ValueError, match="the model's own error"):
        record_forward(model, {"x": torch.randn(2, 8)}, tmp_path / "a.safetensors",
                       reference=tmp_path / "ref.safetensors")
    assert torch.finfo(torch.float64).eps == np.finfo(np.float64).eps


class _Denoiser(nn.Module):
    """A diffusion denoiser's timestep embedding as such code is written: the frequencies made in float32 by name and
    the integer timesteps cast with `.float()`, then an upcast `.to(torch.float32)` before a norm (as Hugging Face's
    RMSNorm does)."""

    def __init__(self) -> None:
        super().__init__()
        self.time = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        freqs = torch.exp(-9.21 * torch.arange(4, dtype=torch.float32) / 4)
        args = t[:, None].float() * freqs[None]
        emb = torch.cat([torch.sin(args), torch.cos(args)], dim=-1)
        h = self.time(emb).to(torch.float32)
        return self.head(h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))


def test_float32_tensors_the_forward_makes_are_made_in_float64_by_the_reference(tmp_path) -> None:
    """The reference had refused such a model ("met a float32 tensor ... mat1 and mat2 must have the same dtype"), or
    would have rounded its re-run to float32 at an upcast: each call site is made in float64 and named (`widened`),
    and the reference is the loop's arithmetic in float64, within float32 rounding of it."""
    torch.manual_seed(0)
    model = _Denoiser()
    batch = {"t": torch.randint(0, 1000, (6,))}
    a = record_forward(model, batch, tmp_path / "a.safetensors", reference=tmp_path / "ref.safetensors")
    meta = open_trace(tmp_path / "ref.safetensors").metadata
    for site in ("torch.arange(dtype=float32) at test_reference_fidelity.py", ".float() at test_reference_fidelity.py",
                 ".to(float32) at test_reference_fidelity.py"):
        assert site in meta["widened"], meta["widened"]
    ref = open_trace(tmp_path / "ref.safetensors")
    assert ref.info("step0.outputs.output").dtype == "F64"
    loop = open_trace(a)
    assert _relative(np.asarray(loop.array("step0.outputs.output")),
                     np.asarray(ref.array("step0.outputs.output"))) < 1e-5
    # the recorder's own float32 tensors are left as they are, and the model as given
    assert all(p.dtype == torch.float32 for p in model.parameters())

"""`burnside.compare.compare_traces` alone gives the pipeline's verdict: forensics (`compare_with_evidence`) adds
evidence, never a verdict. On real PyTorch runs where compare's own measurement decides (a LayerNorm's epsilon
inside the float64 reference's noise band, judged a real difference by the layer's measured settings), and on
every rule fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

import burnside
from burnside.compare import compare_traces, open_reference
from burnside.pipeline import compare_with_evidence
from burnside.trace import open_trace
from tests.diagnose.test_noise_measured import _as_port, _record

FIXTURES = Path(__file__).resolve().parents[1] / "diagnose" / "fixtures"


@pytest.mark.parametrize("eps_b", [1e-6, 1e-5])
def test_a_norm_epsilon_in_the_noise_band_is_judged_by_compare_alone(tmp_path, eps_b):
    a = _record(tmp_path / "a.safetensors", 1e-5, reference=tmp_path / "ref.safetensors")
    b = _as_port(tmp_path, _record(tmp_path / "b.safetensors", eps_b))
    alone = compare_traces(open_trace(a), open_trace(b), reference=open_reference(tmp_path / "ref.safetensors"))
    pipeline = compare_with_evidence(open_trace(a), open_trace(b), reference=tmp_path / "ref.safetensors")
    assert alone.passed == pipeline.passed == (eps_b == 1e-5)
    norm = next(r for r in alone.rows if r.name == "step0.activations.norm")
    assert (norm.ref.verdict, norm.ref.overruled) == next(
        (r.ref.verdict, r.ref.overruled) for r in pipeline.rows if r.name == norm.name)
    assert burnside.compare_traces(a, b, reference=open_reference(tmp_path / "ref.safetensors")).passed \
        == pipeline.passed


@pytest.mark.parametrize("pair", sorted(p.name[:-len(".a.json")] for p in FIXTURES.glob("*.a.json")))
def test_every_rule_fixture_has_the_same_verdict_alone(pair):
    a, b = FIXTURES / f"{pair}.a.json", FIXTURES / f"{pair}.b.json"
    assert compare_traces(open_trace(a), open_trace(b)).passed == compare_with_evidence(a, b).passed

"""Compare on traces holding tensors as statistics only (format version 3): pairing, the verdict of each
statistics row, `Comparison.passed`, the verdict lines, and the reference refusal.

The traces are real: a small PyTorch loop recorded by `burnside.torch.record` (and its float64 reference by
`record_reference`), rewritten with some steps' tensors as their statistics (`statistics_of` on the recorded
arrays), the way a recorder asked for `full_steps` writes them. A port's rounding or bug is made by changing
the recorded arrays before their statistics are taken.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console
from torch import nn

from burnside.compare import Tolerance, Tolerances, compare_traces
from burnside.diagnose import diagnose
from burnside.errors import TraceError
from burnside.pipeline import compare_with_evidence
from burnside.recording.reference import record_reference
from burnside.report.html import html_report
from burnside.report.json_report import comparison_json
from burnside.report.table import render, statistics_lines
from burnside.torch import record
from burnside.trace import open_trace, write_trace
from burnside.trace.metadata import statistics_refusal
from burnside.trace.statistics import lower_bound, statistics_of

STEPS = 4


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _loop():
    torch.manual_seed(0)
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
               for _ in range(STEPS)]
    return model, opt, batches


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A directory with `a.safetensors` (PyTorch, every step in full) and `ref.safetensors` (its float64
    reference, no variants)."""
    d = tmp_path_factory.mktemp("statistics")
    model, opt, batches = _loop()
    record_reference(model, opt, batches, d / "ref.safetensors", steps=STEPS, variants=False)
    model, opt, batches = _loop()
    record(model, opt, batches, d / "a.safetensors", steps=STEPS)
    return d


def _restat(src: Path, dst: Path, steps: set[int], edit=None, framework: str | None = None) -> Path:
    """``src`` rewritten at ``dst`` with every tensor of ``steps`` that may be statistics as its statistics, after
    ``edit`` (name -> function of the recorded array) changed it."""
    trace = open_trace(src)
    edit = edit or {}
    tensors, statistics = {}, {}
    for name in trace.names:
        array = np.array(trace.array(name))
        if name in edit:
            array = edit[name](array).astype(array.dtype)
        info = trace.info(name)
        step = int(name.split(".")[0][4:])
        if step in steps and statistics_refusal(name, info.dtype, info.shape) is None:
            statistics[name] = statistics_of(array, info.dtype)
        else:
            tensors[name] = array
    metadata = dict(trace.metadata)
    if framework is not None:
        metadata["framework"] = framework
    if steps:
        metadata["full_steps"] = [k for k in range(trace.steps) if k not in steps]
    return write_trace(dst, tensors, metadata, statistics=statistics)


def _one_ulp_up(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, np.float32(np.inf), dtype=np.float32)


def test_full_against_statistics_bit_identical(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    b = _restat(a, tmp_path / "b.safetensors", {1, 2}, framework="burn")
    held = list(open_trace(b).statistics)
    assert len(held) > 10  # grads, params after, optimizer moments, layer outputs of two steps
    c = compare_with_evidence(a, b)
    assert [s.name for s in c.statistics] == held
    assert not {r.name for r in c.rows} & set(held)  # rules and forensics see full tensors only
    assert all(s.verdict == "identical" and s.held_a == "full" and s.held_b == "statistics" for s in c.statistics)
    assert c.passed
    assert diagnose(c) == []  # gradients held as statistics still count as gradients (D002, D012 stay quiet)
    assert statistics_lines(c) == [(f"{len(held)} tensors recorded as statistics (steps 1-2): {len(held)} "
                                    "bit-identical", "green")]
    doc = json.loads(comparison_json(c, []))
    assert doc["passed"] and len(doc["statistics"]) == len(held)
    assert {(s["verdict"], s["bit_identical"], s["lower_bound"]) for s in doc["statistics"]} == {("identical", True, 0)}


def test_rounding_in_a_statistics_step_is_not_judged(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    name = "step1.grads.fc1.weight"
    sa = _restat(a, tmp_path / "sa.safetensors", {1, 2})
    sb = _restat(a, tmp_path / "sb.safetensors", {1, 2}, {name: _one_ulp_up}, framework="burn")
    c = compare_traces(open_trace(sa), open_trace(sb))
    array = open_trace(a).array(name)
    bound = lower_bound(statistics_of(array, "F32"), statistics_of(_one_ulp_up(array), "F32"))
    assert 0 < bound < 1e-6
    row = next(s for s in c.statistics if s.name == name)
    assert (row.verdict, row.held_a, row.held_b, row.lower_bound) == ("not judged", "statistics", "statistics", bound)
    assert [s.name for s in c.unjudged_statistics] == [name] and c.passed
    n = len(c.statistics)
    assert statistics_lines(c) == [
        (f"{n} tensors recorded as statistics (steps 1-2): {n - 1} bit-identical, 1 not judged (they differ by at "
         f"least {bound:.2e}; statistics cannot tell rounding from a bug: record those steps in full, "
         "full_steps=[1])", "yellow"),
        (f"statistics part first at step 1: {name} (differs by at least {bound:.2e})", "yellow")]


def test_a_bug_in_a_statistics_step_is_out_of_tolerance(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    name = "step2.params_after.fc1.weight"
    b = _restat(a, tmp_path / "b.safetensors", {1, 2}, {name: lambda x: x * 1.01}, framework="burn")
    c = compare_with_evidence(a, b)
    array = open_trace(a).array(name)
    bound = lower_bound(statistics_of(array, "F32"), statistics_of((array * 1.01).astype(np.float32), "F32"))
    assert bound > 1e-3  # 1% of weights of magnitude up to 0.5
    assert [(s.name, s.verdict, s.lower_bound) for s in c.failed_statistics] == [(name, "out of tolerance", bound)]
    assert not c.failed_rows and not c.passed  # the full rows agree; the statistics prove the failure
    lines = statistics_lines(c)
    assert lines[1][0] == (f"statistics part first at step 2: {name} (differs by at least {bound:.2e}): out of "
                           "tolerance, beyond the 1.00e-06 it allows")
    console = Console(record=True, width=400, color_system=None)
    render(c, diagnose(c), console)
    out = console.export_text()
    row_line = next(line for line in out.splitlines() if line.startswith(name))
    assert "stats (A full, B statistics)" in row_line and f"max|diff|>={bound:.2e}" in row_line
    assert row_line.endswith("out of tolerance (beyond 1.00e-06)  FAIL")
    assert "FAIL" in out.splitlines()[next(i for i, x in enumerate(out.splitlines()) if x.startswith("worst="))]
    doc = json.loads(comparison_json(c, []))
    entry = next(s for s in doc["statistics"] if s["name"] == name)
    assert (entry["verdict"], entry["bit_identical"], entry["dtype"], entry["shape"]) == \
        ("out of tolerance", False, "F32", [8, 4])
    assert doc["passed"] is False
    page = html_report(c, [])
    assert 'id="statistics"' in page and f"<td class=name>{name}</td>" in page and "out of tolerance" in page
    # the CLI says FAIL with exit 1
    done = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "compare", str(a), str(b)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "out of tolerance (beyond 1.00e-06)  FAIL" in done.stdout


def test_with_a_reference_a_statistics_row_is_never_a_failure(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    name = "step2.params_after.fc1.weight"
    b = _restat(a, tmp_path / "b.safetensors", {1, 2}, {name: lambda x: x * 1.01}, framework="burn")
    c = compare_with_evidence(a, b, reference=recorded / "ref.safetensors")
    row = next(s for s in c.statistics if s.name == name)
    assert row.verdict == "not judged" and c.passed
    ref = open_trace(recorded / "ref.safetensors")
    assert row.ref == statistics_of(ref.array(name), "F64")  # the reference's own statistics, shown
    bound_a, bound_b = row.ref_bounds()
    assert bound_b > bound_a  # B's 1% is visible against the reference too
    assert all(s.verdict in ("identical", "not judged") for s in c.statistics)


def test_a_reference_with_statistics_of_full_tensors_is_refused(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    b = _restat(a, tmp_path / "b.safetensors", set(), framework="burn")
    ref = _restat(recorded / "ref.safetensors", tmp_path / "ref.safetensors", {1})
    first = next(iter(open_trace(ref).statistics))
    message = (f"the reference holds only statistics of {first}, which both traces hold in full: record the "
               "reference with the traces' full_steps")
    with pytest.raises(TraceError) as caught:
        compare_with_evidence(a, b, reference=ref)
    assert str(caught.value) == message
    done = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "compare", str(a), str(b),
                           "--reference", str(ref)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    # B holding those steps as statistics too: nothing is lost, the reference's statistics are shown
    sb = _restat(a, tmp_path / "sb.safetensors", {1}, framework="burn")
    c = compare_with_evidence(a, sb, reference=ref)
    row = next(s for s in c.statistics if s.name == first)
    assert row.ref == open_trace(ref).statistics[first] and c.passed


def test_a_statistics_shape_that_differs_is_a_structure_problem(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    name = "step1.grads.fc1.weight"
    b = _restat(a, tmp_path / "b.safetensors", {1}, {name: lambda x: np.ascontiguousarray(x.T)}, framework="burn")
    c = compare_traces(open_trace(a), open_trace(b))
    problem = next(p for p in c.structure if p.name == name)
    assert (problem.what, problem.a, problem.b, problem.transposed) == ("shape", "[8, 4]", "[4, 8]", True)
    assert name not in {s.name for s in c.statistics} and not c.passed


def test_statistics_of_only_one_side_are_listed_as_only_in(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    trace = open_trace(a)
    # B without fc2's tensors at step 1, A holding them as statistics
    sa = _restat(a, tmp_path / "sa.safetensors", {1})
    kept = {n: np.array(trace.array(n)) for n in trace.names if not (n.startswith("step1.") and "fc2." in n)}
    b = write_trace(tmp_path / "b.safetensors", kept, dict(trace.metadata) | {"framework": "burn"})
    c = compare_traces(open_trace(sa), open_trace(b))
    assert "step1.grads.fc2.weight" in c.only_in_a and not c.passed


def test_proof_needs_the_bound_beyond_the_tolerance(recorded: Path) -> None:
    x = np.array(open_trace(recorded / "a.safetensors").array("step1.params_after.fc1.weight"))
    sa, sb = statistics_of(x, "F32"), statistics_of((x * 1.001).astype(np.float32), "F32")
    bound = lower_bound(sa, sb)
    from burnside.compare.statistics_rows import judge_statistics
    def verdict(tol: Tolerance) -> str:
        return judge_statistics("n", sa, sb, "full", "full", tol, with_reference=False).verdict
    assert verdict(Tolerance(atol=bound * 0.99)) == "out of tolerance"
    assert verdict(Tolerance(atol=bound)) == "not judged"  # |a - b| <= atol passes: equal is no proof
    # rtol scales with the larger side's largest magnitude
    assert verdict(Tolerance(atol=0.0, rtol=bound / max(sa.max_abs, sb.max_abs))) == "not judged"
    # ulps: beyond the gap at the largest magnitude times the ulps allowed
    gap = float(np.spacing(np.float32(max(sa.max_abs, sb.max_abs))))
    assert verdict(Tolerance(atol=0.0, ulps=int(bound / gap) - 2)) == "out of tolerance"
    assert verdict(Tolerance(atol=0.0, ulps=int(bound / gap) + 1)) == "not judged"
    # a NaN on one side only: proven whatever the tolerance
    y = x.copy()
    y[0, 0] = np.nan
    assert judge_statistics("n", sa, statistics_of(y, "F32"), "full", "full", Tolerance(atol=1e30),
                            with_reference=False).verdict == "out of tolerance"
    # tolerances by glob apply to statistics rows as to full ones
    assert Tolerances(overrides=(("*.grads.*", Tolerance(atol=1.0)),)).for_name("step1.grads.fc1.weight").atol == 1.0


def test_traces_without_statistics_read_as_before(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    b = _restat(a, tmp_path / "b.safetensors", set(), framework="burn")
    c = compare_with_evidence(a, b)
    assert c.statistics == [] and statistics_lines(c) == [] and c.passed
    assert "statistics" not in json.loads(comparison_json(c, []))
    assert 'id="statistics"' not in html_report(c, [])


def test_junit_fails_a_proven_statistics_row_and_skips_the_unjudged(recorded: Path, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from burnside.report.junit import comparison_junit

    a = recorded / "a.safetensors"
    bug, rounding = "step2.params_after.fc1.weight", "step1.grads.fc2.weight"
    b = _restat(a, tmp_path / "b.safetensors", {1, 2}, {bug: lambda x: x * 1.01, rounding: _one_ulp_up},
                framework="burn")
    c = compare_with_evidence(a, b)
    suite = ET.fromstring(comparison_junit(c, diagnose(c))).find("testsuite")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases[bug].find("failure").get("message") == "statistics prove it out of tolerance"
    assert cases[rounding].find("skipped") is not None and cases[rounding].find("failure") is None
    assert len(cases) == len(c.rows) + len(c.statistics)
    assert int(suite.get("failures")) == 1
    assert "tensors recorded as statistics (steps 1-2)" in suite.find("system-out").text


def test_a_nonfinite_statistics_tensor_marks_the_run_diverged(recorded: Path, tmp_path: Path) -> None:
    a = recorded / "a.safetensors"
    name = "step1.grads.fc1.weight"

    def poison(x: np.ndarray) -> np.ndarray:
        y = x.copy()
        y[0, 0] = np.inf
        return y
    b = _restat(a, tmp_path / "b.safetensors", {1, 2}, {name: poison}, framework="burn")
    c = compare_with_evidence(a, b)
    assert c.b.first_nonfinite == name and c.diverged == ["b"]
    row = next(s for s in c.statistics if s.name == name)
    assert row.lower_bound == float("inf") and row.verdict == "out of tolerance" and not c.passed


def test_a_trace_recorded_with_full_steps_compares_against_the_full_one(tmp_path: Path) -> None:
    def loop():
        torch.manual_seed(0)
        model = _Net()
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(1)
        batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
                   for _ in range(5)]
        return model, opt, batches

    record(*loop(), tmp_path / "full.safetensors", steps=5)
    record(*loop(), tmp_path / "part.safetensors", steps=5, full_steps=[0, -1])
    part = open_trace(tmp_path / "part.safetensors")
    c = compare_with_evidence(tmp_path / "full.safetensors", part)
    assert {s.step for s in c.statistics} == {1, 2, 3} and len(c.statistics) == len(part.statistics)
    assert all(s.bit_identical for s in c.statistics) and c.passed
    assert diagnose(c) == []  # Adam's replay skips the step after a statistics-only state, nothing misread
    assert statistics_lines(c) == [(f"{len(c.statistics)} tensors recorded as statistics (steps 1-3): "
                                    f"{len(c.statistics)} bit-identical", "green")]


def test_an_unjudged_layer_output_asks_for_layer_statistics_off(recorded: Path, tmp_path: Path) -> None:
    """A layer output held as statistics at a step left out of full_steps asks for that step in full; only a trace
    recorded with layer_statistics (every step's layers as statistics) asks for layer_statistics=False too."""
    a = recorded / "a.safetensors"
    name = "step2.activations.fc1"
    b = _restat(a, tmp_path / "b.safetensors", {2}, {name: _one_ulp_up}, framework="burn")
    c = compare_with_evidence(a, b)
    assert [s.name for s in c.unjudged_statistics] == [name] and c.passed
    assert statistics_lines(c)[0][0].endswith("record those steps in full, full_steps=[2])")
    trace = open_trace(b)
    layered = write_trace(tmp_path / "layered.safetensors", {n: np.array(trace.array(n)) for n in trace.names},
                          {**trace.metadata, "layer_statistics": True}, statistics=trace.statistics)
    c = compare_with_evidence(a, layered)
    assert statistics_lines(c)[0][0].endswith("record those steps in full, full_steps=[2], layer_statistics=False)")

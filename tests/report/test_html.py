"""The HTML report's content, from real traces: the diagnosis fixtures (recorded from PyTorch runs) and
a large pair, through the real console script. The browser test (test_browser.py) checks it renders."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from burnside.pipeline import compare_with_evidence
from burnside.diagnose import diagnose
from burnside.report import write_html_report
from burnside.trace import open_trace, write_trace
from tests.core.conftest import base_metadata, run_cli

FIXTURES = Path(__file__).parents[1] / "diagnose" / "fixtures"


def _pair(name: str) -> tuple[Path, Path]:
    return FIXTURES / f"{name}.a.json", FIXTURES / f"{name}.b.json"


def test_failing_pair_shows_verdict_diagnosis_fix_and_first_divergence(tmp_path: Path) -> None:
    a, b = _pair("d003_bad")
    out = tmp_path / "report.html"
    proc = run_cli("report", str(a), str(b), "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    assert "FAIL" in proc.stdout and f"report: {out}" in proc.stderr
    page = out.read_text()
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    diagnoses = diagnose(comparison)
    assert diagnoses, "the D003 fixture must draw a diagnosis"
    assert '<section id="verdict" class="fail"><div class="word">FAIL</div>' in page
    for d in diagnoses:
        assert f'<span class="rule">{d.rule}</span>' in page
        assert d.fix.replace("'", "&#x27;").replace('"', "&quot;")[:40] in page
    first = comparison.first_divergence
    # The verdict links to the first diverging row, which the table marks.
    assert f'href="#first-divergence" class=mono>{first.name}</a>' in page
    row = re.search(r'<tr class="first" id="first-divergence"><td class=name>([^<]+)</td>', page)
    assert row is not None and row.group(1) == comparison.display_name(first.name)
    # One table row per compared tensor, failing ones marked.
    table = page[page.index('<div id="tensors">'):]
    assert len(re.findall(r"<tr class=\"(?:first|fail|noise|)\"(?: id=\"first-divergence\")?><td class=name>", table)) \
        == len(comparison.rows)
    assert table.count('<tr class="fail">') + 1 == len(comparison.failed_rows)
    # Self-contained: no script, no network reference.
    assert "<script" not in page
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page)


def test_passing_pair_is_ok_with_every_plot_embedded(tmp_path: Path) -> None:
    a, b = _pair("d003_good")
    out = tmp_path / "ok.html"
    proc = run_cli("report", str(a), str(b), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert '<section id="verdict" class="ok"><div class="word">OK</div>' in page
    for key in ("loss", "drift", "drift-ulps"):
        assert re.search(fr'<figure id="plot-{key}"><img alt="[^"]*" src="data:image/png;base64,', page), key


def test_metadata_differences_are_highlighted(tmp_path: Path) -> None:
    a, b = _pair("d003_good")
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    comparison.b.metadata["loss_fn"] = "mse"  # as a port that declares another loss would record
    page = write_html_report(comparison, [], tmp_path / "r.html").read_text()
    assert re.search(r'<tr class="differs"><td class=name>loss_fn</td>', page)
    # The sides' own identities differ by nature and are not flagged.
    assert re.search(r'<tr class=""><td class=name>framework</td>', page)


def test_report_of_large_traces_stays_small(tmp_path: Path) -> None:
    """32 MiB per side: the page holds summaries and plots, and the histogram counts every element."""
    n = 8 << 20
    rng = np.random.default_rng(3)
    weight = rng.standard_normal(n).astype(np.float32)
    other = weight.copy()
    other[:: 1 << 12] += np.float32(1e-3)  # a sparse difference: 2048 elements
    meta = base_metadata() | {"params": ["w"], "grads_len": [1]}
    a = write_trace(tmp_path / "a.safetensors", {"step0.params_after.w": weight}, meta)
    b = write_trace(tmp_path / "b.safetensors", {"step0.params_after.w": other}, meta | {"framework": "burn"})
    out = tmp_path / "big.html"
    proc = run_cli("report", str(a), str(b), "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    assert out.stat().st_size < 400_000, out.stat().st_size
    page = out.read_text()
    assert '<figure id="plot-distribution"><img' in page


def test_histogram_counts_every_element(tmp_path: Path) -> None:
    from burnside.report.distribution import CHUNK, difference_histogram

    n = 3 * CHUNK + 17  # crosses chunk borders
    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = x.copy()
    y[5] = np.inf
    y[CHUNK + 1] += np.float32(0.5)
    y[2 * CHUNK + 3 :: 1000] += np.float32(1e-4)
    meta = base_metadata() | {"params": ["w"], "grads_len": [1]}
    a = write_trace(tmp_path / "a.safetensors", {"step0.grads.w": x}, meta)
    b = write_trace(tmp_path / "b.safetensors", {"step0.grads.w": y}, meta)
    h = difference_histogram(a, b, "step0.grads.w")
    assert h.n == n and h.nonfinite == 1
    assert h.zeros + int(h.counts.sum()) + h.nonfinite == n
    edges, counts = h.trimmed()
    assert counts.sum() == h.counts.sum() and edges[0] <= np.log10(1e-4) and edges[-1] >= np.log10(0.5)


@pytest.mark.parametrize("args, says", [
    (["missing.json", "{b}", "-o", "{out}"], "missing.json: no such file"),
    (["{a}", "{b}"], "Missing option '-o'"),
    (["{a}", "{b}", "-o", "{tmp}"], "is a directory"),
    (["{a}", "{b}", "-o", "{out}", "--reference", "{a}"], "not a float64 reference trace"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path, args: list[str], says: str) -> None:
    a, b = _pair("d003_good")
    out = tmp_path / "r.html"
    filled = [x.format(a=a, b=b, out=out, tmp=tmp_path) for x in args]
    proc = run_cli("report", *filled, cwd=tmp_path)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() and not list(tmp_path.glob(".r.html.*"))


def test_compare_writes_the_report_too(tmp_path: Path) -> None:
    a, b = _pair("d001_bad")
    out = tmp_path / "c.html"
    proc = run_cli("compare", str(a), str(b), "--report", str(out))
    assert proc.returncode == 1
    assert "D001" in proc.stdout and '<span class="rule">D001</span>' in out.read_text()


def test_non_finite_values_are_reported_not_crashed_on(tmp_path: Path) -> None:
    """A diverged port (NaN logits, an infinite gradient, NaN parameters after the step): the optimizer
    forensics fit only finite evidence, and compare and report both give a verdict."""
    from tests.core.conftest import a1_like_tensors

    good = a1_like_tensors()
    bad = {name: values.copy() for name, values in good.items()}
    bad["step0.logits"][0, 0] = np.nan
    bad["step0.grads.fc1.weight"][1, 1] = np.inf
    bad["step0.params_after.fc2.bias"][:] = np.nan
    a = write_trace(tmp_path / "a.safetensors", good, base_metadata())
    b = write_trace(tmp_path / "b.safetensors", bad, base_metadata("burn"))
    out = tmp_path / "nan.html"
    proc = run_cli("report", str(a), str(b), "-o", str(out))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert 'href="#first-divergence" class=mono>step0.logits</a>' in out.read_text()
    proc = run_cli("compare", str(a), str(b))
    assert proc.returncode == 1 and "FAIL" in proc.stdout and "Traceback" not in proc.stderr

"""`burnside conformance`: the CI subset run through the command, each case's verdict what the catalogue says
(a catalogued difference measured as its kind, every other case the same on both sides), and the two sides'
case lists in agreement."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from burnside.catalogue import CATALOGUE
from burnside.conformance import all_cases, select
from burnside.conformance.suite import burn_case_ids


def run_cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def ci_results(tmp_path_factory):
    """The CI subset's results, from `burnside conformance --ci --json`."""
    out = tmp_path_factory.mktemp("conformance")
    proc = run_cli("conformance", "--ci", "--json", "--out-dir", str(out / "cases"), "--report",
                   str(out / "page.html"), cwd=out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), out


def test_both_sides_have_the_same_cases():
    python = {c.id for c in all_cases() if not c.not_comparable}
    rust = set(burn_case_ids())
    assert python - rust == set(), "cases with no burn side"
    assert rust - python == set(), "burn cases with no PyTorch side"


def test_every_catalogued_difference_has_its_case():
    ids = {c.id for c in all_cases()}
    assert [k.case for k in CATALOGUE if k.case not in ids] == []


def test_ci_subset_verdicts_are_the_catalogues(ci_results):
    """A catalogued case comes out as its kind, with the catalogue's cause; any other case the same."""
    results, _ = ci_results
    known = {k.case: k for k in CATALOGUE}
    got = {c["id"]: c for c in results["cases"]}
    assert set(got) == {c.id for c in select(all_cases(), ci=True)}
    for case_id, case in got.items():
        if case_id in known:
            assert case["verdict"] == known[case_id].kind, case
        elif case["verdict"] == "framework":  # burn's arithmetic the referee models (Adam's constants)
            assert "(catalogued: burnside's referee models it)" in case["detail"], case
        else:
            assert case["verdict"] == "same", case
            assert case["detail"] in ("bit-identical", "rounding")
            # both sides within a few float32 rounding steps of the float64 run
            assert case["rel_torch"] < 1e-5 and case["rel_burn"] < 1e-5, case


def test_a_different_default_is_named_with_its_fix(ci_results):
    results, _ = ci_results
    rms = next(c for c in results["cases"] if c["id"] == "rms_norm/default")
    assert rms["verdict"] == "default"
    assert "with_epsilon" in rms["fix"]
    # burn's epsilon 1e-5 against PyTorch's 1.19e-7 shows well above the float32 rounding PyTorch's run has
    assert rms["rel_burn"] > 10 * rms["rel_torch"]


@pytest.mark.parametrize(("case", "rule", "told"), [
    ("hard_sigmoid__default", "D010", "HardSigmoidConfig::new().with_alpha(1.0 / 6.0)"),
    ("kl_div__default", "D010", "Reduction::Mean"),
    ("sgd__burn-default", "D009", "with_dampening(0.0)"),
    ("relu6__kinks", "D019", "relu6/kinks"),
])
def test_a_port_meeting_a_catalogued_difference_is_told_it_is_burns(ci_results, case, rule, told):
    """The case's own traces, diagnosed as a user's port is: the rule fires and its fix names the catalogue's entry."""
    from burnside.diagnose import diagnose
    from burnside.pipeline import compare_with_evidence

    _, out = ci_results
    d = out / "cases" / case
    comparison = compare_with_evidence(d / "torch.safetensors", d / "burn.safetensors",
                                       reference=d / "reference.safetensors")
    found = {x.rule: x for x in diagnose(comparison)}
    assert rule in found, sorted(found)
    assert told in found[rule].fix


def test_the_report_page_lists_every_case(ci_results):
    results, out = ci_results
    page = (out / "page.html").read_text()
    for case in results["cases"]:
        assert case["id"] in page
    assert results["versions"]["burn"] == "0.22.1"


def test_no_case_matching_is_one_line_and_exit_2(tmp_path):
    proc = run_cli("conformance", "--only", "no-such-layer/*", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--list" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["--report", "/nonexistent-dir/page.html"], ["--markdown", "/nonexistent-dir/t.md"],
                                  ["--out-dir", "/proc/no-such-place"]])
def test_an_unusable_output_path_is_one_line_before_anything_runs(tmp_path, args):
    proc = run_cli("conformance", "--only", "linear/*", *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and args[0] in proc.stderr
    assert proc.stdout == ""  # no case ran

"""Every rule, lint or diagnosis, has one shape: ID, name, title, severity, four-part doc, fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnside.pipeline import compare_with_evidence
from burnside.diagnose import diagnose
from burnside.diagnose.rules import RULES
from burnside.rule_registry import all_rules, find_rule
from burnside.trace import open_trace

TESTS = Path(__file__).parents[1]
DIAGNOSIS_FIXTURES = Path(__file__).parent / "fixtures"


def _fixtures(rule) -> list[Path]:
    if rule.kind == "lint":
        return [TESTS / "lint" / "fixtures" / f"{rule.id.lower()}_{kind}.rs" for kind in ("bad", "good")]
    return [DIAGNOSIS_FIXTURES / f"{rule.id.lower()}_{kind}.{side}.json" for kind in ("bad", "good") for side in "ab"]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_every_rule_has_the_one_shape(rule):
    assert rule.id[:2] in ("BS", "D0") and rule.name == rule.name.lower() and " " not in rule.name
    assert rule.title and "\n" not in rule.title
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in rule.doc, (rule.id, section)
    missing = [p.name for p in _fixtures(rule) if not p.is_file()]
    assert not missing, f"{rule.id} lacks fixtures {missing}"
    assert find_rule(rule.id.lower()) == rule


def _diagnose(rule_id: str, kind: str):
    a = open_trace(DIAGNOSIS_FIXTURES / f"{rule_id.lower()}_{kind}.a.json")
    b = open_trace(DIAGNOSIS_FIXTURES / f"{rule_id.lower()}_{kind}.b.json")
    comparison = compare_with_evidence(a, b)
    return comparison, {d.rule: d for d in diagnose(comparison)}


@pytest.mark.parametrize("rule_id", [m.ID for m in RULES])
def test_the_bad_pair_is_named_by_its_rule(rule_id):
    comparison, found = _diagnose(rule_id, "bad")
    assert rule_id in found, f"{rule_id} did not fire; found {sorted(found)}"
    assert not comparison.passed
    assert found[rule_id].fix


@pytest.mark.parametrize("rule_id", [m.ID for m in RULES])
def test_the_good_pair_passes_with_no_diagnosis(rule_id):
    comparison, found = _diagnose(rule_id, "good")
    assert comparison.passed and not found

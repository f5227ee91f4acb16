"""Allow comments and the test-code severity drop."""

from __future__ import annotations

from burnside.lint import lint_paths
from burnside.lint.finding import Severity
from tests.lint.fixture_findings import FIXTURES, findings_of


def test_allow_comments():
    # Only the step under an allow for another rule, and the one separated from
    # its allow comment by a blank line, survive.
    assert findings_of("suppression.rs") == [("BS001", 34, 5), ("BS001", 40, 5)]


def test_test_code_drops_one_level():
    report = lint_paths([FIXTURES / "cfg_test.rs"], ["BS001", "BS003", "BS004"], root=FIXTURES, jobs=1)
    got = [(f.rule, f.line, f.severity) for f in report.findings]
    assert got == [
        ("BS001", 5, Severity.ERROR),  # production code keeps its level
        ("BS001", 13, Severity.WARNING),  # helper inside #[cfg(test)] mod
        ("BS004", 26, Severity.INFO),  # info stays info
        ("BS001", 28, Severity.WARNING),
        ("BS003", 28, Severity.INFO),  # warning -> info
        ("BS001", 35, Severity.WARNING),  # top-level #[test] fn
    ]
    lines = {f.line for f in report.findings}
    # `let _model = ...` followed by `optim.to_record()` fills state on purpose.
    assert 19 not in lines
    # The last statement of a #[test] fn: a "does not panic" test, nothing could check the module.
    assert 42 not in lines
    assert "let _ = optim.step(0.1, model.clone(), grads);" in (FIXTURES / "cfg_test.rs").read_text().splitlines()[41]


def test_severity_demotion_order():
    assert Severity.ERROR.demoted() is Severity.WARNING
    assert Severity.WARNING.demoted() is Severity.INFO
    assert Severity.INFO.demoted() is Severity.INFO

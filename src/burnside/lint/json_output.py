"""`--format json`: the findings as a JSON list, one object per finding."""

from __future__ import annotations

import json

from burnside.lint.engine import LintReport


def render_json(report: LintReport) -> str:
    return json.dumps([f.to_dict() for f in report.findings], indent=2) + "\n"

"""`--format sarif`: SARIF 2.1.0 as GitHub code scanning reads it."""

from __future__ import annotations

import json
from urllib.parse import quote

from burnside import __version__
from burnside.lint.engine import LintReport
from burnside.lint.finding import Severity

_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _section(doc: str, title: str) -> str:
    """The body of one `## title` section of a rule docstring."""
    parts = doc.split("## ")
    for part in parts:
        if part.startswith(title):
            return part[len(title) :].strip()
    return doc.strip()


def _sarif_rules() -> list[dict]:
    from burnside.lint.rules import RULES

    rules = []
    for rule_id, module in RULES.items():
        doc = module.__doc__ or ""
        rules.append(
            {
                "id": rule_id,
                "name": module.NAME,
                "shortDescription": {"text": module.TITLE},
                "fullDescription": {"text": " ".join(_section(doc, "What it does").split())},
                "help": {"text": doc.strip(), "markdown": doc.strip()},
                "defaultConfiguration": {"level": _LEVEL[module.SEVERITY]},
                "properties": {"tags": ["burn", "training", "correctness"]},
            }
        )
    return rules


def render_sarif(report: LintReport) -> str:
    rules = _sarif_rules()
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results = []
    for finding in report.findings:
        results.append(
            {
                "ruleId": finding.rule,
                "ruleIndex": index[finding.rule],
                "level": _LEVEL[finding.severity],
                "message": {"text": f"{finding.message}. help: {finding.help}"},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": quote(finding.path), "uriBaseId": "%SRCROOT%"},
                            "region": {
                                "startLine": finding.line,
                                "startColumn": finding.column,
                                "endLine": finding.end_line,
                                "endColumn": finding.end_column,
                            },
                        }
                    }
                ],
                "properties": {"source": finding.source},
            }
        )
    sarif = {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "burnside",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"

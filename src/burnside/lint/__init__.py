"""`burnside lint`: find silent burn training bugs in Rust source before anything runs.

Kept import-light: tree-sitter and the rules load only when a file is parsed.
"""

from burnside.lint.engine import LintReport, lint_paths, lint_source, select_rules
from burnside.lint.finding import Finding, Severity

__all__ = ["Finding", "LintReport", "Severity", "lint_paths", "lint_source", "select_rules"]

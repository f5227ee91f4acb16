"""`burnside lint`: find silent burn training bugs in Rust source before anything runs.

Kept import-light: tree-sitter loads only when a file is parsed (the rules load with the engine, whose
prefilter is built from their tokens).
"""

from burnside.lint.engine import LintReport, lint_paths, lint_source, select_rules
from burnside.lint.finding import Finding, Severity

__all__ = ["Finding", "LintReport", "Severity", "lint_paths", "lint_source", "select_rules"]

"""The lint engine: file discovery, the byte prefilter, parsing, running rules,
suppression and test-code severity, and spreading files over worker processes."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from burnside.errors import BurnsideError
from burnside.lint.finding import Finding, Severity

# Every rule starts from one of these tokens; a file without any of them cannot
# produce a finding, and most Rust files have none, so they are never parsed.
PREFILTER = re.compile(rb"step\s*\(|from_grads|AdamW?Config|MomentumConfig|with_momentum")
# Plain substring tests run at memchr speed; the regex only confirms `step` hits.
_PLAIN_TOKENS = (b"from_grads", b"AdamConfig", b"AdamWConfig", b"MomentumConfig", b"with_momentum")
_STEP_CALL = re.compile(rb"step\s*\(")


def needs_parsing(source: bytes) -> bool:
    """The byte-level prefilter (same answer as `PREFILTER.search`, faster)."""
    if b"step" in source and _STEP_CALL.search(source) is not None:
        return True
    return any(token in source for token in _PLAIN_TOKENS)

# Below this many files, forking workers costs more than it saves.
POOL_MIN_FILES = 300


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    files_seen: int = 0
    files_parsed: int = 0
    lines: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, other: LintReport) -> None:
        self.findings.extend(other.findings)
        self.files_seen += other.files_seen
        self.files_parsed += other.files_parsed
        self.lines += other.lines
        self.skipped.extend(other.skipped)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def has_errors(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> list[str]:
    from burnside.lint.rules import RULES

    chosen = [r.strip().upper() for r in select] if select else list(RULES)
    ignored = {r.strip().upper() for r in ignore or []}
    unknown = [r for r in [*chosen, *ignored] if r not in RULES]
    if unknown:
        raise BurnsideError(f"unknown rule {', '.join(unknown)}; known rules: {', '.join(RULES)}")
    return [r for r in chosen if r not in ignored]


def discover(paths: list[Path]) -> list[str]:
    """`.rs` files under the given paths, skipping `target/` and hidden directories.

    A file named explicitly is linted whatever its extension.
    """
    files: list[str] = []
    for path in paths:
        if not path.exists():
            raise BurnsideError(f"{path} does not exist; pass a .rs file or a directory")
        if path.is_file():
            files.append(str(path))
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if d != "target" and not d.startswith("."))
            files.extend(os.path.join(dirpath, name) for name in sorted(filenames) if name.endswith(".rs"))
    return files


def display_path(path: Path | str, root: Path | str) -> str:
    """Repo-relative POSIX path when the file is under `root`, else the path as given.

    String arithmetic on absolute paths rather than Path.resolve(): resolving
    every file's symlinks cost more than linting burn's whole tree.
    """
    absolute = os.path.abspath(path)
    base = os.path.abspath(root)
    if absolute == base:
        return os.path.basename(absolute)
    prefix = base if base.endswith(os.sep) else base + os.sep
    if absolute.startswith(prefix):
        return absolute[len(prefix) :].replace(os.sep, "/")
    return str(path).replace(os.sep, "/")


def lint_source(path: str, source: bytes, rule_ids: list[str]) -> list[Finding]:
    """All findings for one file's bytes (no prefilter: the caller decides)."""
    from burnside.lint.bindings import forget_trees
    from burnside.lint.rules import RULES
    from burnside.lint.suppression import AllowComments, in_test_code
    from burnside.lint.syntax import SourceUnit

    unit = SourceUnit.parse(path, source)
    allow = AllowComments(source)
    findings = []
    try:
        for rule_id in rule_ids:
            rule = RULES[rule_id]
            for hit in rule.check(unit):
                node = hit.node
                row = node.start_point.row
                if allow.allows(rule_id, row, node):
                    continue
                severity = rule.SEVERITY.demoted() if in_test_code(node) else rule.SEVERITY
                findings.append(
                    Finding(
                        rule=rule_id,
                        severity=severity,
                        path=path,
                        line=row + 1,
                        column=unit.column(row, node.start_point.column),
                        end_line=node.end_point.row + 1,
                        end_column=unit.column(node.end_point.row, node.end_point.column),
                        message=hit.message,
                        help=hit.help,
                        snippet=unit.lines[row].decode("utf-8", "replace").rstrip("\r") if row < len(unit.lines) else "",
                    )
                )
    finally:
        forget_trees()
    return findings


def _lint_files(files: list[tuple[str, str]], rule_ids: list[str]) -> LintReport:
    """Worker body: read, prefilter, parse and lint (file path, display path) pairs."""
    report = LintReport()
    for real, shown in files:
        report.files_seen += 1
        try:
            with open(real, "rb") as handle:
                source = handle.read()
        except OSError as exc:
            report.skipped.append((shown, exc.strerror or "unreadable"))
            continue
        try:
            source.decode("utf-8")
        except UnicodeDecodeError:
            report.skipped.append((shown, "not UTF-8"))
            continue
        report.lines += source.count(b"\n")
        if not needs_parsing(source):
            continue
        report.files_parsed += 1
        report.findings.extend(lint_source(shown, source, rule_ids))
    return report


def _pool_context():
    import multiprocessing

    # fork: workers inherit the imported rules, so start-up is a few milliseconds.
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return None


def lint_paths(
    paths: list[Path],
    rule_ids: list[str],
    root: Path | None = None,
    jobs: int | None = None,
) -> LintReport:
    root = root or Path.cwd()
    files = [(p, display_path(p, root)) for p in discover(paths)]
    jobs = jobs if jobs is not None else min(2, os.cpu_count() or 1)
    report = LintReport()
    if jobs <= 1 or len(files) < POOL_MIN_FILES:
        report.merge(_lint_files(files, rule_ids))
    else:
        from concurrent.futures import ProcessPoolExecutor

        # Interleaved shares so big and small directories spread evenly. The
        # parent lints share 0 itself while jobs-1 forked workers take the rest:
        # one fork fewer, and no idle parent.
        shares = [files[i::jobs] for i in range(jobs)]
        with ProcessPoolExecutor(max_workers=jobs - 1, mp_context=_pool_context()) as pool:
            pending = [pool.submit(_lint_files, share, rule_ids) for share in shares[1:]]
            report.merge(_lint_files(shares[0], rule_ids))
            for future in pending:
                report.merge(future.result())
    report.findings.sort(key=lambda f: f.sort_key)
    return report

"""The lint engine: file discovery, the byte prefilter, parsing, running rules,
suppression and test-code severity, and spreading files over worker processes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from burnside.errors import BurnsideError
from burnside.lint.finding import Finding, Severity
from burnside.lint.prefilter import build
from burnside.lint.rules import RULES
from burnside.lint.syntax import SPLIT_BYTES

# Most Rust files hold none of the tokens the rules declare (`burnside.lint.prefilter`), so they are never parsed.
_PREFILTER = build(RULES.values())
#: Any rule's token: a file without one cannot produce a finding.
PREFILTER = _PREFILTER.pattern
#: The byte-level prefilter (same answer as `PREFILTER.search`, faster).
needs_parsing = _PREFILTER.needs_parsing

# Below this many files, forking workers costs more than it saves.
POOL_MIN_FILES = 300


# A tree deeper than tree-sitter's query cursor can walk (about 65,000 levels)
# silently yields no candidates. Files that may get near it are measured first
# and reported as skipped; real Rust code stays below a few hundred levels.
MAX_NESTING = 50_000
_OPENERS = b"{(["
_CLOSERS = b"})]"
# Characters that can add a level to a left-leaning chain: `a.b().c()`, `a + b + c`.
_LINKS = b".+-*/%&|^<>="
_SEPARATORS = b";{}"


@dataclass(frozen=True)
class _PendingFinding:
    """A finding that holds only if the crate-wide pass finds a matching init (see config_flow)."""

    finding: Finding
    real_path: str
    pending: object  # config_flow.PendingConfig


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    files_seen: int = 0
    files_parsed: int = 0
    lines: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    pending: list[_PendingFinding] = field(default_factory=list)

    def merge(self, other: LintReport) -> None:
        self.findings.extend(other.findings)
        self.files_seen += other.files_seen
        self.files_parsed += other.files_parsed
        self.lines += other.lines
        self.skipped.extend(other.skipped)
        self.pending.extend(other.pending)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def has_errors(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> list[str]:
    chosen = [r.strip().upper() for r in select] if select else list(RULES)
    ignored = {r.strip().upper() for r in ignore or []}
    unknown = [r for r in [*chosen, *ignored] if r not in RULES]
    if unknown:
        raise BurnsideError(f"unknown rule {', '.join(unknown)}; known rules: {', '.join(RULES)}")
    return [r for r in chosen if r not in ignored]


def _discover(paths: list[Path]) -> list[str]:
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


def nesting_bound(source: bytes) -> int:
    """An upper bound on how many levels deep the syntax tree of `source` nests.

    Every bracket adds two levels (the bracketed node and its statement or
    argument list); between two statement boundaries (`;`, `{`, `}`) every
    method call or binary operator can add two more to a left-leaning chain.
    Brackets inside strings and comments count too, so this only errs high.
    """
    # Cheap screen first: the totals bound the maxima, and almost every file passes.
    total = len(source) - len(source.translate(None, _OPENERS + _LINKS))
    if 2 * total <= MAX_NESTING:
        return 2 * total
    import numpy as np

    data = np.frombuffer(source, dtype=np.uint8)
    step = np.zeros(256, dtype=np.int64)
    step[list(_OPENERS)] = 1
    step[list(_CLOSERS)] = -1
    depth = np.cumsum(step[data])
    deepest = int(depth.max()) if depth.size else 0
    link = np.zeros(256, dtype=np.int64)
    link[list(_LINKS)] = 1
    running = np.cumsum(link[data])
    separator = np.zeros(256, dtype=bool)
    separator[list(_SEPARATORS)] = True
    edges = np.concatenate(([0], running[separator[data]], running[-1:]))
    longest = int(np.diff(edges).max()) if edges.size > 1 else 0
    return 2 * (deepest + longest)


def _finding(rule_id: str, severity: Severity, path: str, unit, hit) -> Finding:
    node = hit.node
    row = node.start_point.row
    return Finding(
        rule=rule_id,
        severity=severity,
        path=path,
        line=row + 1 + unit.line_offset,
        column=unit.column(row, node.start_point.column),
        end_line=node.end_point.row + 1 + unit.line_offset,
        end_column=unit.column(node.end_point.row, node.end_point.column),
        message=hit.message,
        help=hit.help,
        snippet=unit.lines[row].decode("utf-8", "replace").rstrip("\r") if row < len(unit.lines) else "",
    )


def _too_deep(source: bytes) -> str | None:
    """Why `source` cannot be analysed, when it nests deeper than the query cursor reaches."""
    if 2 * len(source) <= MAX_NESTING:
        return None
    bound = nesting_bound(source)
    if bound <= MAX_NESTING:
        return None
    return f"syntax nested up to {bound:,} levels deep, over the {MAX_NESTING:,} the linter can follow"


def lint_source(
    path: str,
    source: bytes,
    rule_ids: list[str],
    pending: list[_PendingFinding] | None = None,
    real_path: str | None = None,
    skipped: list[tuple[str, str]] | None = None,
) -> list[Finding]:
    """All findings for one file's bytes (no prefilter beyond the rules' tokens: the caller decides).

    Configs that leave the file are appended to `pending` for the crate-wide
    pass; without a `pending` list they are resolved against this file alone.
    A part too deeply nested to analyse is reported in `skipped` (a
    BurnsideError without that list), never passed over silently.
    """
    from burnside.lint.bindings import forget_trees
    from burnside.lint.suppression import AllowComments, in_test_code
    from burnside.lint.syntax import SourceUnit

    findings = []
    own: list[_PendingFinding] = []
    parts = _parsed_pieces(source)
    big = len(parts) > 1 or (bool(parts) and len(parts[0][1]) < len(source))
    for line_offset, piece, tree in parts:
        reason = _too_deep(piece) if tree is None else None
        if reason is not None:
            where = f"{path} (from line {line_offset + 1})" if big else path
            if skipped is None:
                raise BurnsideError(f"{where}: {reason}")
            skipped.append((where, reason))
            continue
        unit = SourceUnit.parse(path, piece, line_offset, tree)
        allow = AllowComments(piece)
        try:
            for rule_id in rule_ids:
                rule = RULES[rule_id]
                for hit in rule.check(unit):
                    node = hit.node
                    if allow.allows(rule_id, node.start_point.row, node):
                        continue
                    severity = rule.SEVERITY.demoted() if in_test_code(node) else rule.SEVERITY
                    finding = _finding(rule_id, severity, path, unit, hit)
                    if hit.pending is not None:
                        own.append(_PendingFinding(finding, real_path or path, hit.pending))
                    else:
                        findings.append(finding)
        finally:
            forget_trees()
    if pending is not None:
        pending.extend(own)
    elif own:
        findings.extend(_resolve_pending(own, [(real_path or path, path)], {real_path or path: source}))
        findings.sort(key=lambda f: f.sort_key)
    return findings


def _parsed_pieces(source: bytes) -> list[tuple[int, bytes, object]]:
    """(first line, bytes, tree or None) of the parts of `source` to lint.

    Between GUARDED_SPLIT_BYTES and SPLIT_BYTES the file is cut into items
    and the cut kept only if every piece parses cleanly (trees returned);
    otherwise, and for any other size, the pieces come unparsed.
    """
    from burnside.lint.syntax import GUARDED_SPLIT_BYTES, parser, pieces

    if not GUARDED_SPLIT_BYTES < len(source) <= SPLIT_BYTES:
        return [(line, piece, None) for line, _, piece in pieces(source, PREFILTER)]
    parts = pieces(source, PREFILTER, GUARDED_SPLIT_BYTES)
    if len(parts) == 1 and len(parts[0][2]) == len(source):
        return [(0, source, None)]
    parsed = []
    for line, _, piece in parts:
        if _too_deep(piece) is not None:
            break
        tree = parser().parse(piece)
        if tree.root_node.has_error:
            break
        parsed.append((line, piece, tree))
    else:
        return parsed
    return [(0, source, None)]


def _resolve_pending(
    pending: list[_PendingFinding],
    files: list[tuple[str, str]],
    sources: dict[str, bytes] | None = None,
) -> list[Finding]:
    """Follow configs that left their file through the other files of their crate.

    A pending finding is reported, with the place of the init in its message,
    when one of the inits it reaches lacks the setter.
    """
    if not pending:
        return []
    from dataclasses import replace

    from burnside.lint.bindings import forget_trees
    from burnside.lint.config_flow import Crate, Flow, crate_root

    roots: dict[str, str] = {}
    by_root: dict[str, list[tuple[str, str]]] = {}
    for real, shown in files:
        by_root.setdefault(crate_root(real, roots), []).append((real, shown))
    crates: dict[str, Crate] = {}
    found = []
    try:
        for item in pending:
            root = crate_root(item.real_path, roots)
            crate = crates.get(root)
            if crate is None:
                crate = crates[root] = Crate(by_root.get(root, []), sources)
            config = item.pending
            flow = Flow()
            seen: set = set()
            for escape in config.escapes:
                crate.resolve(escape, config.config_type, flow, 0, seen)
            missing = [i for i in flow.inits if config.setter not in i.setters]
            if missing:
                first = min(missing, key=lambda i: (i.path != item.finding.path, i.path, i.line))
                where = f"line {first.line}" if first.path == item.finding.path else f"{first.path}:{first.line}"
                found.append(replace(item.finding,
                                     message=f"{item.finding.message}; turned into an optimizer at {where}"))
    finally:
        forget_trees()
    return found


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
        report.findings.extend(lint_source(shown, source, rule_ids, report.pending, real, report.skipped))
    return report


def _pool_context():
    import multiprocessing

    # fork: workers inherit the imported rules, so start-up is a few milliseconds.
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


# Files are claimed in batches of this many from a counter shared by all processes.
_CLAIM_FILES = 8
# The work list of this process: set in the parent, inherited (or passed once) by workers.
_work: dict[str, object] = {}


def _share_work(files: list[tuple[str, str]], rule_ids: list[str], claimed) -> None:
    _work.update(files=files, rule_ids=rule_ids, claimed=claimed)


def _lint_claimed() -> LintReport:
    """Lint batches of the shared file list until every batch has been claimed by some process.

    Claiming rather than fixed shares: the parsing cost sits in a few large
    training files, and whichever process gets them would otherwise finish last.
    """
    files, rule_ids, claimed = _work["files"], _work["rule_ids"], _work["claimed"]
    report = LintReport()
    while True:
        with claimed.get_lock():
            start = claimed.value
            claimed.value = start + _CLAIM_FILES
        if start >= len(files):
            return report
        report.merge(_lint_files(files[start : start + _CLAIM_FILES], rule_ids))


def lint_paths(
    paths: list[Path],
    rule_ids: list[str],
    root: Path | None = None,
    jobs: int | None = None,
) -> LintReport:
    root = root or Path.cwd()
    files = [(p, display_path(p, root)) for p in _discover(paths)]
    jobs = jobs if jobs is not None else min(2, os.cpu_count() or 1)
    report = LintReport()
    if jobs <= 1 or len(files) < POOL_MIN_FILES:
        report.merge(_lint_files(files, rule_ids))
    else:
        from concurrent.futures import ProcessPoolExecutor

        # The parent lints alongside jobs-1 forked workers: one fork fewer, and
        # no idle parent. All claim batches from one shared counter.
        context = _pool_context()
        claimed = context.Value("l", 0)
        _share_work(files, rule_ids, claimed)
        try:
            with ProcessPoolExecutor(
                max_workers=jobs - 1,
                mp_context=context,
                initializer=_share_work,
                initargs=(files, rule_ids, claimed),
            ) as pool:
                pending = [pool.submit(_lint_claimed) for _ in range(jobs - 1)]
                report.merge(_lint_claimed())
                for future in pending:
                    report.merge(future.result())
        finally:
            _work.clear()
    report.findings.extend(_resolve_pending(report.pending, files))
    report.pending = []
    report.findings.sort(key=lambda f: f.sort_key)
    return report

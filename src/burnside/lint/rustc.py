"""`--rustc CRATE_DIR`: rustc's own `unused_results` warnings on optimizer steps, as BS001.

Runs `cargo check` with `-W unused_results` added to RUSTFLAGS (through burnside's one cargo
driver), in a directory of its own inside burnside's target directory: other RUSTFLAGS would
invalidate every cached build artifact. Keeps only the warnings whose span contains `.step(`.
"""

from __future__ import annotations

from pathlib import Path

from burnside.burn.cargo import check_crate, target_dir
from burnside.burn.locate import workspace_manifest_of
from burnside.errors import BuildError
from burnside.lint.engine import display_path
from burnside.lint.finding import Finding, Severity


def rustc_step_findings(crate: Path, root: Path) -> list[Finding]:
    """BS001 findings from rustc's `unused_results` lint on `.step(` calls of the crate at ``crate``."""
    run = check_crate(crate, rustflags="-W unused_results", target=target_dir() / "lint-unused-results")
    if run.returncode != 0:
        errors = run.errors()
        detail = errors[0].message if errors else (run.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise BuildError(f"cargo check failed in {crate}: {detail}")
    manifest = workspace_manifest_of(crate)
    workspace = manifest.parent if manifest else crate  # rustc names files relative to the workspace root
    findings: list[Finding] = []
    for diagnostic in run.diagnostics:
        if diagnostic.code != "unused_results" or diagnostic.file is None:
            continue
        snippet = diagnostic.snippet
        if ".step(" not in "".join(snippet.split()):
            continue
        path = Path(diagnostic.file)
        if not path.is_absolute():
            path = workspace / path
        findings.append(
            Finding(
                rule="BS001",
                severity=Severity.ERROR,
                path=display_path(path, root),
                line=diagnostic.line or 1,
                column=diagnostic.column or 1,
                end_line=diagnostic.end_line or diagnostic.line or 1,
                end_column=diagnostic.end_column or 1,
                message="result of optimizer step is discarded (rustc unused_results)",
                help="assign the updated module: `model = optim.step(lr, model, grads);`",
                source="rustc",
                snippet=snippet.splitlines()[0] if snippet else "",
            )
        )
    return findings


def merge_rustc(findings: list[Finding], extra: list[Finding]) -> list[Finding]:
    """Add rustc's findings that tree-sitter did not already report (same file and line)."""
    seen = {(f.path, f.line) for f in findings if f.rule == "BS001"}
    merged = list(findings)
    merged.extend(f for f in extra if (f.path, f.line) not in seen)
    merged.sort(key=lambda f: f.sort_key)
    return merged

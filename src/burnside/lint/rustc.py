"""`--rustc CRATE_DIR`: rustc's own `unused_results` warnings on optimizer steps, as BS001.

Runs `cargo check --message-format=json` with `-W unused_results` added to
RUSTFLAGS, in a separate target directory (changing RUSTFLAGS would otherwise
invalidate the crate's normal build cache), and keeps only the warnings whose
span contains `.step(`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from burnside.errors import BuildError
from burnside.lint.engine import display_path
from burnside.lint.finding import Finding, Severity

DEFAULT_TARGET_DIR = Path.home() / ".cache" / "burnside" / "cargo-target"


def _workspace_root(crate: Path, cargo: str) -> Path:
    # rustc reports file names relative to the workspace root, not the member crate.
    done = subprocess.run(
        [cargo, "locate-project", "--workspace", "--message-format", "plain"],
        cwd=crate,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not done.stdout.strip():
        return crate
    return Path(done.stdout.strip()).parent


def rustc_step_findings(crate: Path, root: Path) -> list[Finding]:
    cargo = shutil.which("cargo")
    if cargo is None:
        raise BuildError("cargo not found on PATH; install Rust (rustup) or drop --rustc")
    if not (crate / "Cargo.toml").is_file():
        raise BuildError(f"{crate} has no Cargo.toml; --rustc takes a crate directory")
    env = dict(os.environ)
    env["RUSTFLAGS"] = (env.get("RUSTFLAGS", "") + " -W unused_results").strip()
    env.setdefault("CARGO_TARGET_DIR", str(DEFAULT_TARGET_DIR))
    workspace = _workspace_root(crate, cargo)
    done = subprocess.run(
        [cargo, "check", "--message-format=json", "--quiet"],
        cwd=crate,
        env=env,
        capture_output=True,
        text=True,
    )
    findings: list[Finding] = []
    first_error = None
    for line in done.stdout.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("reason") != "compiler-message":
            continue
        message = record.get("message") or {}
        if message.get("level") == "error" and first_error is None:
            first_error = message.get("message")
        code = (message.get("code") or {}).get("code")
        if code != "unused_results":
            continue
        for span in message.get("spans", []):
            if not span.get("is_primary"):
                continue
            snippet_lines = [t.get("text", "") for t in span.get("text", [])]
            if ".step(" not in "".join("".join(snippet_lines).split()):
                continue
            path = Path(span["file_name"])
            if not path.is_absolute():
                path = workspace / path
            findings.append(
                Finding(
                    rule="BS001",
                    severity=Severity.ERROR,
                    path=display_path(path, root),
                    line=span["line_start"],
                    column=span["column_start"],
                    end_line=span["line_end"],
                    end_column=span["column_end"],
                    message="result of optimizer step is discarded (rustc unused_results)",
                    help="assign the updated module: `model = optim.step(lr, model, grads);`",
                    source="rustc",
                    snippet=snippet_lines[0] if snippet_lines else "",
                )
            )
    if done.returncode != 0:
        detail = first_error or (done.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise BuildError(f"cargo check failed in {crate}: {detail}")
    return findings


def merge_rustc(findings: list[Finding], extra: list[Finding]) -> list[Finding]:
    """Add rustc's findings that tree-sitter did not already report (same file and line)."""
    seen = {(f.path, f.line) for f in findings if f.rule == "BS001"}
    merged = list(findings)
    merged.extend(f for f in extra if (f.path, f.line) not in seen)
    merged.sort(key=lambda f: f.sort_key)
    return merged

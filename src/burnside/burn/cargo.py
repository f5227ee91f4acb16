"""Drive cargo: locate it, pick the shared target directory, build with progress, read rustc.

Every build reads cargo's `--message-format=json` stream: `compiler-artifact` messages are
counted for the progress display and give the executables' paths; `compiler-message`
messages carry rustc's diagnostics (with their rendered text), which is how burnside reads
both a failed build and the programs that are meant not to compile.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from burnside.errors import BuildError

#: Where builds go unless CARGO_TARGET_DIR says otherwise; it outlives a CI checkout.
DEFAULT_TARGET_DIR = Path.home() / ".cache" / "burnside" / "cargo-target"

_NO_CARGO = "cargo not found: install Rust with rustup (https://rustup.rs) and re-run"


def find_cargo() -> str:
    """The cargo executable on PATH, or a BuildError saying how to get one."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise BuildError(_NO_CARGO)
    return cargo


def target_dir() -> Path:
    """`CARGO_TARGET_DIR` if set, else ~/.cache/burnside/cargo-target (shared by every build)."""
    configured = os.environ.get("CARGO_TARGET_DIR")
    return Path(configured) if configured else DEFAULT_TARGET_DIR


def rust_workspace() -> Path:
    """burnside's Cargo workspace (`rust/` next to `src/`), or `BURNSIDE_RUST_DIR`."""
    configured = os.environ.get("BURNSIDE_RUST_DIR")
    workspace = Path(configured) if configured else Path(__file__).resolve().parents[3] / "rust"
    if not (workspace / "Cargo.toml").is_file():
        raise BuildError(f"burnside's Rust workspace is not at {workspace}; set BURNSIDE_RUST_DIR "
                         "to the rust/ directory of a burnside checkout")
    return workspace


@dataclass
class Diagnostic:
    """One rustc diagnostic: level, code (E0382), message, the rendered text, where."""

    level: str
    code: str | None
    message: str
    rendered: str
    file: str | None
    line: int | None
    target: str
    suggestions: list[str] = field(default_factory=list)

    @classmethod
    def from_message(cls, msg: dict) -> Diagnostic:
        """From a cargo `compiler-message` JSON object."""
        diag = msg["message"]
        primary = next((s for s in diag.get("spans", []) if s.get("is_primary")), None)
        suggestions = [span["suggested_replacement"]
                       for child in diag.get("children", []) for span in child.get("spans", [])
                       if span.get("suggested_replacement")]
        return cls(level=diag["level"], code=(diag.get("code") or {}).get("code"), message=diag["message"],
                   rendered=diag.get("rendered") or diag["message"],
                   file=primary["file_name"] if primary else None,
                   line=primary["line_start"] if primary else None,
                   target=msg.get("target", {}).get("name", ""), suggestions=suggestions)


@dataclass
class BuildResult:
    """What a build produced: executables by bin name, rustc diagnostics, the command, the time."""

    command: list[str]
    returncode: int
    executables: dict[str, Path]
    diagnostics: list[Diagnostic]
    stderr: str
    artifacts: int
    seconds: float

    def warnings(self, target: str | None = None) -> list[Diagnostic]:
        """rustc's lint warnings (they carry a lint name as code; summaries do not), optionally of one target."""
        return [d for d in self.diagnostics
                if d.level == "warning" and d.code is not None and (target is None or d.target == target)]

    def errors(self) -> list[Diagnostic]:
        """rustc errors, first first."""
        return [d for d in self.diagnostics if d.level == "error"]


def _cargo(args: list[str], cwd: Path, what: str, console: Console | None) -> BuildResult:
    """Run `cargo build ... --message-format=json`, showing progress on ``console``."""
    import time

    command = [find_cargo(), "build", "--release", "--message-format=json", *args]
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir())}
    executables: dict[str, Path] = {}
    diagnostics: list[Diagnostic] = []
    artifacts = 0
    start = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        plain = console is not None and not console.is_terminal
        progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                            console=console, transient=True, disable=console is None or plain)
        if plain:  # no live display on a pipe or in CI: say what is happening, once
            console.print(f"building {what} with cargo into {target_dir()} (a cold build takes minutes)…")
        with progress:
            task = progress.add_task(f"building {what} (a cold build takes minutes)", total=None)
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    continue
                reason = msg.get("reason")
                if reason == "compiler-artifact":
                    artifacts += 1
                    name = msg["target"]["name"]
                    if msg.get("executable") and "bin" in msg["target"]["kind"]:
                        executables[name] = Path(msg["executable"])
                    progress.update(task, description=f"building {what}: {artifacts} crates ready ({name})")
                elif reason == "compiler-message":
                    diagnostics.append(Diagnostic.from_message(msg))
            returncode = proc.wait()
        if plain:
            console.print(f"cargo finished in {time.monotonic() - start:.1f} s ({artifacts} crates checked or built)")
        stderr.seek(0)
        err = stderr.read()
    return BuildResult(command, returncode, executables, diagnostics, err, artifacts, time.monotonic() - start)


def _failure(result: BuildResult, cwd: Path, what: str) -> BuildError:
    errors = result.errors()
    if errors:
        first = errors[0]
        where = f" ({first.file}:{first.line})" if first.file else ""
        reason = f"error{f'[{first.code}]' if first.code else ''}: {first.message}{where}"
    else:
        lines = [l for l in result.stderr.splitlines() if l.strip()]
        reason = next((l for l in lines if l.startswith("error")), lines[-1] if lines else "no output")
    return BuildError(f"building {what} failed: {reason}; reproduce with: cd {shlex.quote(str(cwd))} && "
                      f"CARGO_TARGET_DIR={shlex.quote(str(target_dir()))} {shlex.join(result.command)}")


def build(manifest_dir: Path, *, bins: list[str] | None = None, what: str | None = None,
          extra: list[str] | None = None, console: Console | None = None) -> BuildResult:
    """Build a crate or workspace in release mode; raise BuildError with rustc's first error."""
    args = list(extra or [])
    for name in bins or []:
        args += ["--bin", name]
    what = what or manifest_dir.name
    result = _cargo(args, manifest_dir, what, console)
    if result.returncode != 0:
        raise _failure(result, manifest_dir, what)
    missing = [b for b in bins or [] if b not in result.executables]
    if missing:
        raise BuildError(f"building {what} produced no binary named {', '.join(missing)}")
    return result


def build_workspace(console: Console | None = None) -> BuildResult:
    """Build all of burnside's Rust programs (one feature set for all, so nothing rebuilds twice)."""
    return build(rust_workspace(), what="burnside's burn programs", extra=["--workspace"], console=console)


@dataclass
class CompileError:
    """rustc's verdict on a program that must not compile."""

    code: str | None
    message: str
    rendered: str
    file: str | None
    line: int | None
    suggests_clone: bool
    command: list[str]


def expect_compile_error(package: str, feature: str, bin_name: str,
                         console: Console | None = None) -> CompileError:
    """Build `bin_name` of `package` (turned on by `feature`) and return rustc's first error.

    The whole workspace is built with the feature added, so the dependency features stay the
    ones every other build uses and nothing but the failing program is compiled. A program
    that compiles is a BuildError: it was written to be rejected.
    """
    workspace = rust_workspace()
    result = _cargo(["--workspace", "--features", f"{package}/{feature}"], workspace,
                    f"{package} {bin_name} (expected to fail)", console)
    errors = [d for d in result.errors() if d.target == bin_name]
    if result.returncode == 0 or not errors:
        if result.returncode != 0:
            raise _failure(result, workspace, f"{package} (while building {bin_name})")
        raise BuildError(f"{package} bin {bin_name} compiled, but it is the program rustc must reject")
    first = errors[0]
    clone = any(".clone()" in s for s in first.suggestions) or ".clone()" in first.rendered
    return CompileError(first.code, first.message, first.rendered, first.file, first.line, clone, result.command)

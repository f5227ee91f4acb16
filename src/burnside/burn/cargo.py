"""Drive cargo: build with progress, read rustc (finding cargo and the target directory: `locate`).

Every build reads cargo's `--message-format=json` stream: `compiler-artifact` messages are
counted for the progress display and give the executables' paths; `compiler-message`
messages carry rustc's diagnostics (with their rendered text), which is how burnside reads
both a failed build and the programs that are meant not to compile.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from burnside.burn import freshness
from burnside.burn.locate import bin_targets, find_cargo, rust_workspace, target_dir
from burnside.errors import BuildError
from burnside.progress import Progress

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
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    snippet: str = ""  # the source lines of the primary span

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
                   target=msg.get("target", {}).get("name", ""), suggestions=suggestions,
                   column=primary["column_start"] if primary else None,
                   end_line=primary["line_end"] if primary else None,
                   end_column=primary["column_end"] if primary else None,
                   snippet="\n".join(t.get("text", "") for t in primary.get("text", [])) if primary else "")


@dataclass
class CargoRun:
    """One cargo invocation read from its JSON stream: artifacts, diagnostics, stderr, timing."""

    command: list[str]
    returncode: int
    executables: dict[str, Path]
    diagnostics: list[Diagnostic]
    stderr: str
    artifacts: int
    rebuilt: list[str]  # crates compiled by this run (not fresh)
    seconds: float

    def warnings(self, target: str | None = None) -> list[Diagnostic]:
        """rustc's lint warnings (they carry a lint name as code; summaries do not), optionally of one target."""
        return [d for d in self.diagnostics
                if d.level == "warning" and d.code is not None and (target is None or d.target == target)]

    def errors(self) -> list[Diagnostic]:
        """rustc errors, first first."""
        return [d for d in self.diagnostics if d.level == "error"]


def run_cargo(subcommand: str, args: list[str], cwd: Path, *, what: str, console: Console | None = None,
              target: Path | None = None, env: dict[str, str] | None = None, expected: int | None = None) -> CargoRun:
    """Run `cargo SUBCOMMAND --message-format=json ARGS` in ``cwd``; the one place cargo is driven.

    On a terminal a live line shows crates done (of ``expected``, when known) and the crate
    just built; off a terminal a build that takes longer than `burnside.progress.EVERY` seconds
    says the same every so often, so a cold build is never minutes of silence (`Progress.activity`).
    """
    command = [find_cargo(), subcommand, "--message-format=json", *args]
    env = {**os.environ, **(env or {}), "CARGO_TARGET_DIR": str(target or target_dir())}
    executables: dict[str, Path] = {}
    diagnostics: list[Diagnostic] = []
    rebuilt: list[str] = []
    artifacts = 0
    start = time.monotonic()
    of = f" of about {expected}" if expected else ""
    with tempfile.TemporaryFile(mode="w+") as stderr:
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        except OSError as exc:
            raise BuildError(f"cannot run cargo ({exc.strerror}); check your Rust installation") from None
        with Progress(console) as progress, _reaped(proc):
            building = progress.activity(f"building {what}")
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
                    if not msg.get("fresh", False):
                        rebuilt.append(name)
                    if msg.get("executable") and "bin" in msg["target"]["kind"]:
                        executables[name] = Path(msg["executable"])
                    building.update(f"{artifacts}{of} crates ({name})")
                elif reason == "compiler-message":
                    diagnostics.append(Diagnostic.from_message(msg))
            returncode = proc.wait()
            building.finish(f"cargo finished in {time.monotonic() - start:.0f} s ({artifacts} crates checked, "
                            f"{len(rebuilt)} compiled) into {env['CARGO_TARGET_DIR']}")
        stderr.seek(0)
        err = stderr.read()
    return CargoRun(command, returncode, executables, diagnostics, err, artifacts, rebuilt, time.monotonic() - start)


@contextlib.contextmanager
def _reaped(proc: subprocess.Popen) -> Iterator[None]:
    """Kill and wait for cargo when the build is left by an exception (Ctrl-C, SIGTERM to burnside alone),
    so no cargo outlives burnside."""
    try:
        yield
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _failure(result: CargoRun, cwd: Path, what: str) -> BuildError:
    errors = result.errors()
    if errors:
        first = errors[0]
        where = f" ({first.file}:{first.line})" if first.file else ""
        reason = f"error{f'[{first.code}]' if first.code else ''}: {first.message}{where}"
    else:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith("error")), lines[-1] if lines else "no output")
        if "no bin target named" in reason:
            try:
                reason += f" (the binaries cargo knows here: {', '.join(bin_targets(cwd)) or 'none'})"
            except BuildError:
                pass  # cargo cannot list them either: the error itself says enough
    return BuildError(f"building {what} failed: {reason}; reproduce with: cd {shlex.quote(str(cwd))} && "
                      f"CARGO_TARGET_DIR={shlex.quote(str(target_dir()))} {shlex.join(result.command)}")


def build(manifest_dir: Path, *, bins: list[str] | None = None, what: str | None = None,
          extra: list[str] | None = None, console: Console | None = None, reuse: bool = False) -> CargoRun:
    """Build a crate or workspace in release mode; raise BuildError with rustc's first error.

    The executables returned are always the ones built from the sources in ``manifest_dir``,
    whatever other copies of the same packages were built into the shared target directory
    (see `freshness`), and stay so while they run. With ``reuse``, a pinned build of exactly these
    inputs (`freshness.build_inputs`) is returned without running cargo (no diagnostics then, and
    ``rebuilt`` empty): what a port's check wants, not a caller that reads rustc's warnings.
    """
    args = [*(extra or []), "--release"]
    for name in bins or []:
        args += ["--bin", name]
    what = what or manifest_dir.resolve().name  # `--burn-crate .` names the folder, not ""
    target = target_dir()
    if reuse and bins:
        # A pinned build of exactly these inputs is found without waiting for the target directory's lock:
        # another build there (burn's cold build takes minutes) does not hold up a check of an unchanged port.
        # A pin lists its binaries only once they are all in place (`freshness.pin`), and what is returned is
        # run after the lock would be released anyway. On a miss everything is asked again under the lock.
        pinned = _pinned(manifest_dir, target, bins, args)
        if pinned is not None:
            return pinned
    with freshness.locked(target):
        packages = freshness.path_packages(manifest_dir)
        key = freshness.build_inputs(manifest_dir, packages, args) if reuse and bins else None
        pinned = freshness.reused(target, key, bins or [])
        if pinned is not None:
            return _reused_run(pinned, args)
        sources = _forget_other_sources(manifest_dir, target, what, packages)
        result = run_cargo("build", args, manifest_dir, what=what, console=console, target=target,
                           expected=freshness.expected_artifacts(target, manifest_dir))
        if result.returncode != 0:
            raise _failure(result, manifest_dir, what)
        missing = [b for b in bins or [] if b not in result.executables]
        if missing:
            raise BuildError(f"building {what} produced no binary named {', '.join(missing)}")
        if key is not None:
            # cargo may have written the lock file (a port's first build adds the port to it): pin the
            # build under the inputs as they are now, which the next build of these sources will see
            sources = freshness.path_packages(manifest_dir)
            key = freshness.build_inputs(manifest_dir, sources, args)
        freshness.record(target, sources, manifest_dir, result.artifacts)
        result.executables = freshness.pin(target, sources, result.executables, args, key)
    return result


def _pinned(manifest_dir: Path, target: Path, bins: list[str], args: list[str]) -> CargoRun | None:
    """The pinned build of ``bins`` with exactly these inputs, as a CargoRun that ran no cargo, or None."""
    key = freshness.build_inputs(manifest_dir, freshness.path_packages(manifest_dir), args)
    pinned = freshness.reused(target, key, bins)
    return None if pinned is None else _reused_run(pinned, args)


def _reused_run(pinned: dict[str, Path], args: list[str]) -> CargoRun:
    return CargoRun(command=[find_cargo(), "build", *args], returncode=0, executables=pinned, diagnostics=[],
                    stderr="", artifacts=0, rebuilt=[], seconds=0.0)


def _forget_other_sources(manifest_dir: Path, target: Path, what: str,
                          sources: list[freshness.PathPackage]) -> list[freshness.PathPackage]:
    """Clean the path packages (``sources``) last built in ``target`` from other sources, so cargo rebuilds them."""
    for name in freshness.stale_packages(target, sources):
        clean = subprocess.run([find_cargo(), "clean", "--release", "-p", name], cwd=manifest_dir,
                               env={**os.environ, "CARGO_TARGET_DIR": str(target)}, capture_output=True, text=True)
        # A package not yet in the lock file (a crate's first build) has nothing to clean.
        if clean.returncode != 0 and "did not match any packages" not in clean.stderr:
            raise BuildError(f"cargo clean -p {name} failed in {manifest_dir}: {_last_line(clean.stderr)}")
    return sources


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def run_workspace_tests(workspace: Path, args: list[str]) -> subprocess.CompletedProcess:
    """`cargo test ARGS` in ``workspace``, as burnside's builds run: under the target directory's lock, its path
    packages built from these sources (another checkout's artifacts cleaned first, and the state noted after),
    so a test run and a burnside build of another checkout never replace each other's binaries mid-run."""
    target = target_dir()
    with freshness.locked(target):
        packages = freshness.path_packages(workspace)
        _forget_other_sources(workspace, target, "the workspace's tests", packages)
        proc = subprocess.Popen([find_cargo(), "test", *args], cwd=workspace, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "CARGO_TARGET_DIR": str(target)})
        with _reaped(proc):
            out, err = proc.communicate()
        freshness.record(target, packages, workspace, None)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def build_workspace(console: Console | None = None) -> CargoRun:
    """Build all of burnside's Rust programs (one feature set for all, so nothing rebuilds twice)."""
    return build(rust_workspace(), what="burnside's burn programs", extra=["--workspace"], console=console)


def check_crate(crate: Path, *, rustflags: str, target: Path, console: Console | None = None) -> CargoRun:
    """`cargo check` a crate with extra RUSTFLAGS in its own ``target`` directory, for rustc's lints.

    Other RUSTFLAGS invalidate every cached artifact, so this never uses the build directory.
    """
    if not (crate / "Cargo.toml").is_file():
        raise BuildError(f"{crate} has no Cargo.toml; give the directory of a crate")
    flags = f"{os.environ.get('RUSTFLAGS', '')} {rustflags}".strip()
    return run_cargo("check", [], crate, what=f"{crate.name} (cargo check)", console=console, target=target,
                     env={"RUSTFLAGS": flags})


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
    with freshness.locked(target_dir()):
        _forget_other_sources(workspace, target_dir(), package, freshness.path_packages(workspace))
        result = run_cargo("build", ["--release", "--workspace", "--features", f"{package}/{feature}"], workspace,
                           what=f"{package} {bin_name} (expected to fail)", console=console)
    errors = [d for d in result.errors() if d.target == bin_name]
    if result.returncode == 0 or not errors:
        if result.returncode != 0:
            raise _failure(result, workspace, f"{package} (while building {bin_name})")
        raise BuildError(f"{package} bin {bin_name} compiled, but it is the program rustc must reject")
    first = errors[0]
    clone = any(".clone()" in s for s in first.suggestions) or ".clone()" in first.rendered
    return CompileError(first.code, first.message, first.rendered, first.file, first.line, clone, result.command)

"""Which sources a binary in the shared target directory was built from.

burnside builds every crate (its own programs, a user's port, a copy of either) into one
target directory so burn, which takes minutes to compile, is compiled once. cargo decides
whether a package is up to date from file timestamps, and it hashes a path package by its
location relative to its workspace root: two copies of one workspace share their artifacts.
A copy whose sources are older than the other copy's last build would get that build's
binary, silently ("a result computed from a stale build").

So burnside keeps, in the target directory, the content hash of the sources each path
package was last built from. Before a build, a package whose sources hash differently is
cleaned (`cargo clean -p`) so cargo rebuilds it; registry dependencies (burn) stay shared.
After the build, each executable is pinned: hard-linked under a name derived from the hash
of every path package's sources, and that path is what burnside runs. A later build of other
sources replaces cargo's file, not the pinned one. A lock file serialises burnside's builds
in one target directory, so the clean, the build and the pin happen together.

A port's build (`build(..., reuse=True)`) first looks for a pinned build of exactly its inputs
(`build_inputs`: every path package's sources, the workspace manifest and lock file, the cargo
arguments, the toolchain, the build-affecting environment and cargo config files) and runs it
without calling cargo: two checkouts (or ports) taking turns in one target directory rebuild
each one once, not at every turn. A package with a build script is never reused (what it reads
is its own business), nor is a build whose inputs cannot all be read.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from burnside.atomic import write_atomic
from burnside.burn import locate

_STATE = "burnside"  # directory of burnside's own files inside the target directory
_KEEP_PINNED = 16  # pinned builds kept per target directory (oldest removed first)
# `burnside-out` is burnside's own output folder (`check`'s and `run`'s default --out-dir), in the crate when a
# check runs there, as the scaffold's README says: `check` writes its init file into it before it builds, and that
# file's bytes differ from one check to the next (safetensors orders its metadata at random), so hashing it made
# every check of an unchanged port clean and rebuild it.
_SKIP_DIRS = {"target", "burnside-out", ".git", ".hg", ".svn", "node_modules", "__pycache__"}
# Files this large are data, not sources (a weights file beside a port's crate): hashing them
# on every run would cost seconds, and a build embeds them only through include_bytes!.
_LARGEST_SOURCE = 8 << 20


@dataclass(frozen=True)
class PathPackage:
    """A package cargo builds from a local directory: a workspace member or a `path` dependency."""

    name: str
    root: Path
    digest: str  # sha256 of its sources (see `_digest`)
    build_script: bool = False  # a `build.rs` (custom-build target): its inputs are its own


@contextlib.contextmanager
def locked(target: Path) -> Iterator[None]:
    """Hold the target directory's burnside lock (an exclusive flock) for the duration."""
    state = target / _STATE
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def path_packages(manifest_dir: Path) -> list[PathPackage]:
    """Every path package the crate or workspace at ``manifest_dir`` builds, with its sources' hash."""
    found: dict[Path, PathPackage] = {}
    pending = [manifest_dir]
    while pending:
        directory = pending.pop()
        if directory.resolve() in found:
            # a package already listed: its workspace was asked, and gave all its members and their path
            # dependencies (asking again would give the same, at a `cargo metadata` each: a second or more
            # for a port depending on burnside-trace, whose workspace lists every member's dependencies)
            continue
        for package in locate.packages(directory):
            root = Path(package["manifest_path"]).parent.resolve()
            if root in found:
                continue
            build_script = any("custom-build" in t.get("kind", []) for t in package.get("targets", []))
            found[root] = PathPackage(package["name"], root, _digest(root), build_script)
            pending.extend(Path(d["path"]) for d in package.get("dependencies", []) if d.get("path"))
    # Only the packages' own files: cargo's own fingerprint already covers what the workspace
    # root decides (profiles, the lock file's versions, features, edition); what it misses is
    # a path package's content when the timestamps say otherwise.
    return sorted(found.values(), key=lambda p: p.name)


def stale_packages(target: Path, packages: list[PathPackage]) -> list[str]:
    """Names of the packages whose last build in ``target`` was from other sources (or unknown)."""
    built = _read_state(target).get("packages", {})
    return [p.name for p in packages if built.get(p.name) != p.digest]


def expected_artifacts(target: Path, manifest_dir: Path) -> int | None:
    """How many artifacts the last build of this crate or workspace reported (for progress)."""
    value = _read_state(target).get("artifacts", {}).get(str(manifest_dir.resolve()))
    return value if isinstance(value, int) else None


def record(target: Path, packages: list[PathPackage], manifest_dir: Path, artifacts: int | None) -> None:
    """Note that ``packages`` are now built in ``target`` from these sources (and, unless None, how many
    artifacts the build of ``manifest_dir`` reported)."""
    state = _read_state(target)
    state.setdefault("packages", {}).update({p.name: p.digest for p in packages})
    if artifacts is not None:
        state.setdefault("artifacts", {})[str(manifest_dir.resolve())] = artifacts
    write_atomic(target / _STATE / "state.json", json.dumps(state, indent=1))


#: Environment variables that change what cargo builds (besides the cargo arguments).
_BUILD_ENV = ("RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER",
              "RUSTUP_TOOLCHAIN", "CARGO_HOME")
_BUILD_ENV_PREFIXES = ("CARGO_PROFILE_", "CARGO_BUILD_", "CARGO_TARGET_", "CARGO_UNSTABLE_")


def build_inputs(manifest_dir: Path, packages: list[PathPackage], args: list[str]) -> str | None:
    """A hash of everything a build of ``manifest_dir`` with cargo ``args`` depends on, or None when
    that cannot be told (a path package with a build script, a file that cannot be read, a toolchain
    that does not answer): then the build is not reused."""
    if any(p.build_script for p in packages):
        return None
    h = hashlib.sha256()
    for part in [*(f"{p.name}={p.digest}" for p in packages), *args]:
        h.update(part.encode() + b"\0")
    try:
        workspace = locate.workspace_manifest_of(manifest_dir) or manifest_dir / "Cargo.toml"
        for file in (workspace, workspace.with_name("Cargo.lock")):
            h.update(str(file.resolve()).encode() + b"\0" + file.read_bytes() + b"\0")
        for config in _cargo_configs(manifest_dir):
            h.update(str(config).encode() + b"\0" + config.read_bytes() + b"\0")
        h.update(_toolchain(manifest_dir.resolve()).encode())
    except (OSError, subprocess.SubprocessError):
        return None
    for name in sorted(os.environ):
        if name in _BUILD_ENV or name.startswith(_BUILD_ENV_PREFIXES):
            h.update(f"{name}={os.environ[name]}\0".encode())
    return h.hexdigest()[:20]


def _cargo_configs(manifest_dir: Path) -> list[Path]:
    """cargo's config files that apply to a build in ``manifest_dir``: `.cargo/config{,.toml}` there and in
    every parent folder, and in CARGO_HOME."""
    folders = [manifest_dir.resolve(), *manifest_dir.resolve().parents]
    home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    found = [folder / ".cargo" / name for folder in folders for name in ("config", "config.toml")]
    found += [home / name for name in ("config", "config.toml")]
    return [f for f in found if f.is_file()]


@functools.cache
def _toolchain(directory: Path) -> str:
    """`cargo -V` and `rustc -vV` as run in ``directory`` (a `rust-toolchain.toml` there picks another
    toolchain); asked once per folder and process."""
    out = []
    for command in ([locate.find_cargo(), "-V"], [shutil.which("rustc") or "rustc", "-vV"]):
        out.append(subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=60,
                                  check=True).stdout)
    return "\0".join(out)


def reused(target: Path, key: str | None, bins: list[str]) -> dict[str, Path] | None:
    """The pinned executables of a build with inputs ``key``, if one pinned all of ``bins``."""
    if key is None or not bins:
        return None
    directory = target / _STATE / "bin" / key
    try:
        complete = set(json.loads((directory / _COMPLETE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    found = {name: directory / name for name in bins}
    if not set(bins) <= complete or not all(path.is_file() for path in found.values()):
        return None
    os.utime(directory)  # used: kept longest by `_prune`
    return found


_COMPLETE = ".complete"  # the binaries a pinned directory holds, written once they are all in place


def pin(target: Path, packages: list[PathPackage], executables: dict[str, Path], args: list[str],
        key: str | None = None) -> dict[str, Path]:
    """Hard-link each executable under a directory named by the build's inputs (``key``,
    `build_inputs`) or else by the sources' hash and the cargo arguments (profile, features);
    return those paths."""
    if key is None:
        key = hashlib.sha256("\0".join([*(p.digest for p in packages), *args]).encode()).hexdigest()[:20]
    pinned_root = target / _STATE / "bin"
    directory = pinned_root / key
    directory.mkdir(parents=True, exist_ok=True)
    pinned = {}
    for name, path in executables.items():
        destination = directory / path.name
        tmp = directory / f".{path.name}.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.link(path, tmp)
        except OSError:  # a file system without hard links: copy
            shutil.copy2(path, tmp)
        os.replace(tmp, destination)
        pinned[name] = destination
    try:
        held = set(json.loads((directory / _COMPLETE).read_text()))
    except (OSError, ValueError, TypeError):
        held = set()
    write_atomic(directory / _COMPLETE, json.dumps(sorted(held | {p.name for p in pinned.values()})))
    os.utime(directory)
    _prune(pinned_root)
    return pinned


#: A pinned build used (pinned or reused) this recently is kept, however many came after it: another
#: process, or a test session's fixture, may hold its path and run it later.
_KEEP_RECENT_SECONDS = 6 * 3600


def _prune(pinned_root: Path) -> None:
    dirs = sorted((d for d in pinned_root.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime, reverse=True)
    now = time.time()
    for old in dirs[_KEEP_PINNED:]:
        if now - old.stat().st_mtime > _KEEP_RECENT_SECONDS:
            shutil.rmtree(old, ignore_errors=True)


def _digest(root: Path) -> str:
    """sha256 over the package's files (relative path and bytes), build outputs and VCS folders skipped.

    Every file counts, not only `.rs`: `include_bytes!`, build scripts and small data files change a
    build too; files over 8 MiB do not (see `_LARGEST_SOURCE`).
    """
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            if not path.is_file() or path.stat().st_size > _LARGEST_SOURCE:
                continue
            h.update(str(path.relative_to(root)).encode() + b"\0")
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    h.update(block)
            h.update(b"\0")
    return h.hexdigest()


def _read_state(target: Path) -> dict:
    try:
        state = json.loads((target / _STATE / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}

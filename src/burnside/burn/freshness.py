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
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from burnside.atomic import write_atomic
from burnside.burn import locate

_STATE = "burnside"  # directory of burnside's own files inside the target directory
_KEEP_PINNED = 16  # pinned builds kept per target directory (oldest removed first)
_SKIP_DIRS = {"target", ".git", ".hg", ".svn", "node_modules", "__pycache__"}
# Files this large are data, not sources (a weights file beside a port's crate): hashing them
# on every run would cost seconds, and a build embeds them only through include_bytes!.
_LARGEST_SOURCE = 8 << 20


@dataclass(frozen=True)
class PathPackage:
    """A package cargo builds from a local directory: a workspace member or a `path` dependency."""

    name: str
    root: Path
    digest: str  # sha256 of its sources (see `_digest`)


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
        for package in locate.packages(directory):
            root = Path(package["manifest_path"]).parent.resolve()
            if root in found:
                continue
            found[root] = PathPackage(package["name"], root, _digest(root))
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


def record(target: Path, packages: list[PathPackage], manifest_dir: Path, artifacts: int) -> None:
    """Note that ``packages`` are now built in ``target`` from these sources."""
    state = _read_state(target)
    state.setdefault("packages", {}).update({p.name: p.digest for p in packages})
    state.setdefault("artifacts", {})[str(manifest_dir.resolve())] = artifacts
    write_atomic(target / _STATE / "state.json", json.dumps(state, indent=1))


def pin(target: Path, packages: list[PathPackage], executables: dict[str, Path], args: list[str]) -> dict[str, Path]:
    """Hard-link each executable under a directory named by the sources' hash and the cargo
    arguments (profile, features); return those paths."""
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
    os.utime(directory)
    _prune(pinned_root)
    return pinned


def _prune(pinned_root: Path) -> None:
    dirs = sorted((d for d in pinned_root.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime, reverse=True)
    for old in dirs[_KEEP_PINNED:]:
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

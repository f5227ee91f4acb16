"""Where the burn side's tools are, and what cargo says a crate holds.

Finding cargo, the shared target directory and burnside's own Cargo workspace, and the read-only
cargo queries (`cargo metadata`, `cargo locate-project`) that the driver (`cargo`), the freshness
bookkeeping (`freshness`) and lint's rustc pass all need. It imports nothing of burnside's but its
errors, so each of those can use it without importing the others.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from burnside.errors import BuildError

#: Where builds go unless CARGO_TARGET_DIR says otherwise; it outlives a CI checkout.
DEFAULT_TARGET_DIR = Path.home() / ".cache" / "burnside" / "cargo-target"

_NO_CARGO = "cargo not found: install Rust with rustup (https://rustup.rs) and re-run"

#: Where a wheel carries the workspace (setup.py copies `rust/` there); a checkout has it at `rust/`.
_PACKAGED_WORKSPACE = Path(__file__).resolve().parents[1] / "_rust"
_CHECKOUT_WORKSPACE = Path(__file__).resolve().parents[3] / "rust"


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
    """burnside's Cargo workspace: `BURNSIDE_RUST_DIR`, else the installed package's copy, else `rust/` of the
    checkout."""
    configured = os.environ.get("BURNSIDE_RUST_DIR")
    if configured:
        workspace = Path(configured)
        if not (workspace / "Cargo.toml").is_file():
            raise BuildError(f"burnside's Rust workspace is not at {workspace} (BURNSIDE_RUST_DIR): no Cargo.toml "
                             "there; set it to the rust/ directory of a burnside checkout, or unset it")
        return workspace
    for workspace in (_PACKAGED_WORKSPACE, _CHECKOUT_WORKSPACE):
        if (workspace / "Cargo.toml").is_file():
            return workspace
    raise BuildError(f"burnside's Rust workspace is not at {_PACKAGED_WORKSPACE} (the installed package's copy) nor "
                     f"at {_CHECKOUT_WORKSPACE} (a checkout's rust/): no Cargo.toml in either; reinstall burnside, or "
                     "set BURNSIDE_RUST_DIR to the rust/ directory of a burnside checkout")


def trace_crate() -> Path:
    """The `burnside-trace` crate's sources a port depends on (inside `rust_workspace()`)."""
    return rust_workspace() / "burnside-trace"


def packages(directory: Path) -> list[dict]:
    """`cargo metadata --no-deps` of the crate or workspace at ``directory``: its packages, as cargo gives them."""
    proc = subprocess.run([find_cargo(), "metadata", "--format-version", "1", "--no-deps"], cwd=directory,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        last = next((line for line in reversed(proc.stderr.splitlines()) if line.strip()), "no output")
        raise BuildError(f"cargo cannot read the crate at {directory}: {last.strip()}")
    return json.loads(proc.stdout).get("packages", [])


def bin_targets(directory: Path) -> list[str]:
    """The binaries cargo can build from ``directory`` (every package of its workspace), sorted."""
    return sorted({t["name"] for package in packages(directory) for t in package.get("targets", [])
                   if "bin" in t.get("kind", [])})


def workspace_manifest_of(directory: Path) -> Path | None:
    """The Cargo.toml of the workspace the crate at ``directory`` belongs to (None if cargo cannot say)."""
    proc = subprocess.run([find_cargo(), "locate-project", "--workspace", "--message-format", "plain"],
                          cwd=directory, capture_output=True, text=True)
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None

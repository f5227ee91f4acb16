"""burnside's Cargo workspace passes clippy with every warning an error (`-D warnings`): a needless clone, a type
too complex to read or a dead branch fails CI here. One program is checked apart: `pitb-opt`'s `lint` binary drops
an optimizer step's result on purpose, the seed's S15, so that rustc's `unused_results` warns about it; it passes
clippy's own lints with every one an error (`-D clippy::all`) and keeps that one warning.

clippy checks with its own build profile (no code generation), in the shared target directory: the first run
checks burn's crates once (about 4 minutes on 2 cores), later runs only what changed."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from burnside.burn.locate import rust_workspace, target_dir


def _clippy(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir())}
    return subprocess.run(["cargo", "clippy", "--quiet", "--all-targets", *args], cwd=rust_workspace(), env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module", autouse=True)
def _has_clippy():
    if shutil.which("cargo") is None:
        pytest.skip("no cargo on PATH: install Rust with rustup")
    probe = subprocess.run(["cargo", "clippy", "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("no clippy: `rustup component add clippy`")


def test_the_workspace_passes_clippy_with_warnings_denied():
    proc = _clippy("--workspace", "--exclude", "pitb-opt", "--", "-D", "warnings")
    assert proc.returncode == 0, proc.stderr[-6000:]


def test_pitb_opt_passes_clippys_own_lints_and_keeps_its_one_warning():
    proc = _clippy("-p", "pitb-opt", "--", "-D", "clippy::all")
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "unused result of type `a1::Mlp`" in proc.stderr, proc.stderr[-3000:]

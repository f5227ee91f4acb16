"""Two copies of one workspace in the shared target directory each run their own binary, whatever
their timestamps, while burn's compiled crates stay shared between them."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from burnside.burn.binary import run_binary
from burnside.burn.cargo import build
from burnside.burn.locate import rust_workspace

PROBE = "burnside-freshness-probe"


def _workspace(root: Path, word: str) -> Path:
    """A one-crate workspace shaped like a user's port (burn and the burnside-trace recorder as
    dependencies, burnside's profile) whose program prints ``word``."""
    manifest = (rust_workspace() / "Cargo.toml").read_text()
    profiles = manifest[manifest.index("[profile"):]  # the same profile: burn's artifacts are shared only then
    burn = re.search(r"^burn = .*$", manifest, re.M).group(0)
    trace = f'burnside-trace = {{ path = "{rust_workspace() / "burnside-trace"}" }}'
    (root / "probe" / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text(f'[workspace]\nresolver = "3"\nmembers = ["probe"]\n\n{profiles}')
    (root / "Cargo.lock").write_bytes((rust_workspace() / "Cargo.lock").read_bytes())
    (root / "probe" / "Cargo.toml").write_text(
        f'[package]\nname = "{PROBE}"\nversion = "0.1.0"\nedition = "2024"\n\n[dependencies]\n{burn}\n{trace}\n')
    (root / "probe" / "src" / "main.rs").write_text(
        'fn main() {\n    let device = burn::tensor::Device::default();\n'
        f'    let _ = burn::tensor::Tensor::<1>::zeros([2], &device);\n    println!("{word}");\n}}\n')
    return root


def _age(root: Path, seconds: float) -> None:
    """Make every file of the copy look ``seconds`` older than now, as a fresh checkout or copy may."""
    past = time.time() - seconds
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.utime(Path(dirpath) / name, (past, past))


def test_two_copies_each_run_their_own_binary(tmp_path):
    one = _workspace(tmp_path / "one", "one")
    two = _workspace(tmp_path / "two", "two")
    _age(two, 86400)  # older than copy one's build: by timestamps alone cargo would call it fresh

    first = build(one, bins=["burnside-freshness-probe"])
    assert run_binary(first.executables[PROBE]).stdout.strip() == "one"

    second = build(two, bins=["burnside-freshness-probe"])
    assert run_binary(second.executables[PROBE]).stdout.strip() == "two"
    # burn stayed shared: only the probe itself (and, once in a CI run here while other builds of the same
    # workspace shared the directory, the small burnside-trace path dependency) was compiled again
    assert PROBE in second.rebuilt or PROBE.replace("-", "_") in second.rebuilt, second.rebuilt
    assert set(second.rebuilt) <= {PROBE, PROBE.replace("-", "_"), "burnside_trace", "burnside-trace"}, second.rebuilt
    assert run_binary(first.executables[PROBE]).stdout.strip() == "one"  # the first binary was not replaced

    again = build(one, bins=["burnside-freshness-probe"])
    assert run_binary(again.executables[PROBE]).stdout.strip() == "one"

    unchanged = build(one, bins=["burnside-freshness-probe"])
    assert unchanged.rebuilt == []  # same sources, nothing to do

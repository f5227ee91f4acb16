"""Two copies of one workspace in the shared target directory each run their own binary, whatever
their timestamps, while burn's compiled crates stay shared between them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from burnside.burn import freshness
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


def test_copies_taking_turns_reuse_their_own_pinned_builds(tmp_path):
    # A port's check builds with reuse=True: the same inputs again run the pinned binary without cargo.
    one = _workspace(tmp_path / "one", "one")
    two = _workspace(tmp_path / "two", "two")
    for _ in range(2):
        for copy, word in ((one, "one"), (two, "two")):
            built = build(copy, bins=[PROBE], reuse=True)
            assert run_binary(built.executables[PROBE]).stdout.strip() == word
    turn = build(one, bins=[PROBE], reuse=True)
    assert turn.rebuilt == [] and turn.artifacts == 0, "the second turn reused the pinned build"
    main = one / "probe" / "src" / "main.rs"
    main.write_text(main.read_text().replace('println!("one")', 'println!("changed")'))
    changed = build(one, bins=[PROBE], reuse=True)
    assert PROBE.replace("-", "_") in changed.rebuilt or PROBE in changed.rebuilt, changed.rebuilt
    assert run_binary(changed.executables[PROBE]).stdout.strip() == "changed"
    # the build's environment and cargo config are inputs too (asked of the key: building with other
    # RUSTFLAGS would recompile burn, minutes)
    packages = freshness.path_packages(two)
    key = freshness.build_inputs(two, packages, ["--release"])
    os.environ["RUSTFLAGS"] = "-C debug-assertions=off"
    try:
        assert freshness.build_inputs(two, packages, ["--release"]) != key
    finally:
        del os.environ["RUSTFLAGS"]
    (two / ".cargo").mkdir()
    (two / ".cargo" / "config.toml").write_text('[build]\nrustflags = ["-C", "debug-assertions=off"]\n')
    assert freshness.build_inputs(two, packages, ["--release"]) != key
    assert freshness.build_inputs(two, packages, ["--release", "--features", "x"]) != \
        freshness.build_inputs(two, packages, ["--release"])


def test_a_package_with_a_build_script_is_never_reused(tmp_path):
    probe = _workspace(tmp_path / "scripted", "scripted")
    (probe / "probe" / "build.rs").write_text('fn main() { println!("cargo::rerun-if-env-changed=PROBE_WORD"); }\n')
    build(probe, bins=[PROBE], reuse=True)
    again = build(probe, bins=[PROBE], reuse=True)
    assert again.artifacts > 0, "cargo ran: what a build script reads is its own business"


_TURNS = """
import sys
from pathlib import Path
from burnside.burn.binary import run_binary
from burnside.burn.cargo import build
copy, word = Path(sys.argv[1]), sys.argv[2]
for _ in range(3):
    seen = run_binary(build(copy, bins=["burnside-freshness-probe"], reuse=True)\
.executables["burnside-freshness-probe"])
    assert seen.stdout.strip() == word, (seen.stdout, word)
print("ok")
"""


def test_processes_building_two_copies_at_once_each_run_their_own(tmp_path):
    # Four processes, two per copy, three builds each, all at once in the one target directory.
    copies = [(_workspace(tmp_path / word, word), word) for word in ("one", "two")]
    procs = [subprocess.Popen([sys.executable, "-c", _TURNS, str(copy), word], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for copy, word in copies for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "ok", err

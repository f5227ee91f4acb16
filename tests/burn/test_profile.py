"""burnside's release profile (unoptimised, for a short cold build) computes bit for bit what opt-level 3 computes.

rust/Cargo.toml's `[profile.release]` is chosen for a short cold build; `[profile.release-o3]`
is the same workspace fully optimised. Every program burnside runs is run from both builds
and its outputs compared byte for byte: the tensors of every trace it writes and every line
it prints (burn's random ParamIds aside). Rust does not reassociate or contract floating point at any
optimisation level,
so they must agree; this is the proof, not the assumption.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from burnside.burn.locate import find_cargo, rust_workspace, target_dir

#: cargo's flags for the profile burnside builds with, and for the fully optimised reference.
PROFILES = {"release": ["--release"], "release-o3": ["--profile", "release-o3"]}

#: Where a program writes its trace: relative, so the printed `JSON:` line (which names the
#: file) is the same text for both builds, each run in its own directory.
TRACE = "trace.safetensors"

#: (bin, arguments): every program burnside runs that writes or prints numbers, with the
#: arguments burnside and its experiments give it, and longer runs of the training loops.
PROGRAMS = [
    ("train-step", ["--steps", "3", "--optim", "sgd"]),
    ("train-step", ["--steps", "5", "--optim", "adam"]),
    ("train-step", ["--steps", "100", "--optim", "adam"]),
    ("train-step", ["--steps", "3", "--optim", "sgd", "--f32-inputs"]),
    ("train-step", ["--steps", "5", "--optim", "adam", "--f32-inputs"]),
    ("train-step", ["--steps", "5", "--optim", "adam", "--init", "INIT"]),
    ("bugs", ["--bug", "discard", "--steps", "3", "--optim", "sgd"]),
    ("bugs", ["--bug", "discard", "--steps", "5", "--optim", "adam"]),
    ("bugs", ["--bug", "othergrads", "--steps", "3", "--optim", "sgd"]),
    ("bugs", ["--bug", "othergrads", "--steps", "5", "--optim", "adam"]),
    ("bugs", ["--bug", "epsilon", "--steps", "5"]),
    ("moves", []),
    ("train-one-discard", []),
    ("discard", ["sgd"]),
    ("discard", ["adam"]),
    ("othergrads", []),
    ("lint", []),
]

WRITES_TRACE = {"train-step", "bugs"}


def _executables(flags: list[str]) -> dict[str, Path]:
    """Build the workspace with ``flags``; its executables by bin name, from cargo's JSON messages."""
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir())}
    proc = subprocess.run([find_cargo(), "build", *flags, "--workspace", "--message-format=json"],
                          cwd=rust_workspace(), env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    executables = {}
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            executables[msg["target"]["name"]] = Path(msg["executable"])
    return executables


@pytest.fixture(scope="module")
def builds() -> dict[str, dict[str, Path]]:
    """Executables by bin name, for each profile (the reference's first build takes minutes)."""
    return {profile: _executables(flags) for profile, flags in PROFILES.items()}


@pytest.fixture(scope="module")
def init_file(tmp_path_factory) -> Path:
    """A1's starting point exported from PyTorch: the file `burnside check` hands a port."""
    from burnside.examples.a1 import a1_data, a1_model
    from burnside.torch import export_init

    x, y = a1_data()
    return export_init(a1_model(), {"x": x, "y": y}, tmp_path_factory.mktemp("init") / "init.safetensors")


def _run(executable: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    cwd.mkdir()
    return subprocess.run([str(executable), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _json_line(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("JSON: ")]
    assert len(lines) == 1, stdout
    return json.loads(lines[0].removeprefix("JSON: "))


def _without_param_ids(stdout: str) -> str:
    """``stdout`` with each ParamId replaced by its parameter's name: burn draws ParamIds at random."""
    ids = _json_line(stdout).get("ids", {}) if "JSON: " in stdout else {}
    for name, param_id in ids.items():
        stdout = stdout.replace(param_id, f"<{name}>")
    return stdout


def _trace_parts(path: Path) -> tuple[dict, bytes]:
    """A safetensors file as (header, data bytes).

    The header is compared as JSON, not as bytes: the safetensors crate writes the metadata
    map in hash order, which differs from run to run of the same executable. The header holds
    each tensor's dtype, shape and byte range; the data section holds every tensor's bytes.
    """
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + size]), raw[8 + size:]


def test_the_release_profile_and_the_reference_are_different_machine_code(builds):
    assert set(builds["release"]) == set(builds["release-o3"]) >= {bin for bin, _ in PROGRAMS}
    for name, executable in builds["release"].items():
        reference = builds["release-o3"][name]
        assert executable != reference and executable.read_bytes() != reference.read_bytes(), name


@pytest.mark.parametrize(("bin", "args"), PROGRAMS, ids=[" ".join([b, *a]) for b, a in PROGRAMS])
def test_every_output_is_bit_identical_to_opt_level_3(builds, init_file, tmp_path, bin, args):
    args = [str(init_file) if a == "INIT" else a for a in args]
    if bin in WRITES_TRACE:
        args = ["-o", TRACE, *args]
    runs = {profile: _run(builds[profile][bin], args, tmp_path / profile) for profile in PROFILES}
    fast, full = runs["release"], runs["release-o3"]
    assert fast.returncode == full.returncode == 0, fast.stderr + full.stderr
    if bin != "lint":  # lint prints a sentence; its point is rustc's warning at build time
        assert _json_line(fast.stdout).keys() == _json_line(full.stdout).keys()
    assert _without_param_ids(fast.stdout) == _without_param_ids(full.stdout)
    if bin in WRITES_TRACE:
        fast_header, fast_data = _trace_parts(tmp_path / "release" / TRACE)
        full_header, full_data = _trace_parts(tmp_path / "release-o3" / TRACE)
        assert len(fast_header) > 10 and len(fast_data) > 0
        assert fast_header == full_header
        assert fast_data == full_data


def test_the_seed_check_still_panics_in_both_builds(builds, tmp_path):
    """`othergrads --checked` stops on `debug_assert_eq!`: the profile keeps debug assertions on there."""
    runs = {profile: _run(builds[profile]["othergrads"], ["--checked"], tmp_path / profile) for profile in PROFILES}
    for run in runs.values():
        assert run.returncode == 101 and "GradientsParams must hold every A1 parameter" in run.stderr
    panic = re.compile(r"panicked at .*")
    assert panic.findall(runs["release"].stderr) == panic.findall(runs["release-o3"].stderr)

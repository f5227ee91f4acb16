"""A full disk, or a file-size limit, on every output: one line naming the path and the bytes needed,
exit 2, nothing partial left behind.

The limit is real: the CLI runs in a subprocess under RLIMIT_FSIZE with SIGXFSZ ignored, so a write
that would grow a file past the limit fails with EFBIG (reads, and files that stay below it, are
unaffected; a Rust port started from there inherits both). A disk that is really full is a small
tmpfs, where the sandbox lets root mount one.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from burnside.trace import write_trace
from tests.core.conftest import a1_like_tensors, base_metadata

CLI = [sys.executable, "-c", "from burnside.cli import main; main()"]
_NEEDED = re.compile(r": (\d+) bytes(?: \([\d.]+ [KMG]iB\))? to write")


def _limited(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def run_limited(command: list[str], limit: int, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=900, preexec_fn=_limited(limit), **kwargs)


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The single line of stderr of a run that failed with exit 2."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def needed(line: str) -> int:
    match = _NEEDED.search(line)
    assert match, line
    return int(match.group(1))


def limit_line(path: Path, limit: int) -> str:
    """The start of the line for ``path`` at a file-size limit of ``limit`` bytes."""
    return f"error: {path}: larger than the file-size limit (ulimit -f) of {limit} bytes"


def left_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def big_trace(path: Path, elements: int = 32768) -> Path:
    """A one-step trace with a big extra tensor: ``elements`` f32 values more than A1's."""
    tensors = a1_like_tensors() | {"step0.activations.big": np.linspace(-1, 1, elements, dtype=np.float32)}
    meta = base_metadata() | {"activations": ["big"], "modules": {"big": "Linear"}}
    return write_trace(path, tensors, meta)


@pytest.mark.parametrize("src_suffix,dst_suffix", [(".safetensors", ".json"), (".json", ".safetensors")])
def test_convert_past_the_limit_is_one_line_and_leaves_nothing(tmp_path, src_suffix, dst_suffix):
    src = big_trace(tmp_path / f"src{src_suffix}")
    full = tmp_path / f"full{dst_suffix}"
    subprocess.run([*CLI, "convert", str(src), str(full)], check=True, capture_output=True, timeout=300)
    limit = 16384
    assert full.stat().st_size > limit and src.stat().st_size > limit
    out = tmp_path / "out"
    out.mkdir()
    dst = out / f"dst{dst_suffix}"
    line = one_line(run_limited([*CLI, "convert", str(src), str(dst)], limit))
    assert line.startswith(limit_line(dst, limit)), line
    assert needed(line) == full.stat().st_size, line  # exactly the file it would have written
    assert line.endswith("; nothing was written")
    assert left_in(out) == []


@pytest.fixture
def two_traces(tmp_path) -> tuple[Path, Path]:
    a = write_trace(tmp_path / "a.safetensors", a1_like_tensors(0), base_metadata())
    b = write_trace(tmp_path / "b.safetensors", a1_like_tensors(1), base_metadata("burn"))
    return a, b


@pytest.mark.parametrize("option,name", [("--plot", "drift.png"), ("--junit", "result.xml"),
                                         ("--report", "report.html")])
def test_compare_outputs_past_the_limit_are_one_line_and_leave_nothing(tmp_path, two_traces, option, name):
    a, b = two_traces
    full = tmp_path / name
    proc = subprocess.run([*CLI, "compare", str(a), str(b), option, str(full)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr  # the traces differ: a mismatch, and the output written
    limit = 512  # the traces (7 KB each) are read whole; only an output would grow past this
    assert full.stat().st_size > limit
    out = tmp_path / "out"
    out.mkdir()
    target = out / name
    line = one_line(run_limited([*CLI, "compare", str(a), str(b), option, str(target)], limit))
    assert line.startswith(limit_line(target, limit)), line
    assert abs(needed(line) - full.stat().st_size) <= 64, line  # the report's time stamp may differ
    assert left_in(out) == []


def test_compare_with_every_output_stops_at_the_first_that_does_not_fit(tmp_path, two_traces):
    a, b = two_traces
    out = tmp_path / "out"
    out.mkdir()
    args = ["--plot", str(out / "p.png"), "--junit", str(out / "j.xml"), "--report", str(out / "r.html")]
    line = one_line(run_limited([*CLI, "compare", str(a), str(b), "--json", *args], 512))
    assert line.startswith(limit_line(out / "p.png", 512)), line
    assert left_in(out) == []


def test_json_on_stdout_into_a_file_past_the_limit_is_cut_back_to_what_it_held(tmp_path, two_traces):
    a, b = two_traces
    for opened in ("w", "a"):
        target = tmp_path / f"result-{opened}.json"
        target.write_text("kept\n")
        with open(target, opened) as stdout:
            proc = subprocess.run([*CLI, "compare", str(a), str(b), "--json"], stdout=stdout, stderr=subprocess.PIPE,
                                  text=True, timeout=300, preexec_fn=_limited(4096))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"error: stdout ({target}): larger than the file-size limit"), proc.stderr
        assert needed(proc.stderr) > 4096 and proc.stderr.endswith("; nothing was written\n")
        assert target.read_text() == ("" if opened == "w" else "kept\n")


def test_lint_sarif_past_the_limit_is_one_line_and_leaves_nothing(tmp_path):
    from burnside.burn.locate import rust_workspace

    out = tmp_path / "out"
    out.mkdir()
    sarif = out / "lint.sarif"
    crate = rust_workspace() / "train-step"
    line = one_line(run_limited([*CLI, "lint", str(crate), "--format", "sarif", "-o", str(sarif)], 256))
    assert line.startswith(limit_line(sarif, 256)) and needed(line) > 256, line
    assert left_in(out) == []


_RECORD = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    from burnside.errors import BurnsideError
    from burnside.torch import record

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))
    batch = {"x": torch.randn(8, 128), "y": torch.randint(0, 4, (8,))}
    try:
        record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, sys.argv[1], steps=2)
    except BurnsideError as exc:  # what a script would do with the library's one-line message
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
""")


def test_the_pytorch_recorder_past_the_limit_is_one_line_and_leaves_nothing(tmp_path):
    full = tmp_path / "full.safetensors"
    subprocess.run([sys.executable, "-c", _RECORD, str(full)], check=True, capture_output=True, timeout=300)
    limit = 65536
    assert full.stat().st_size > limit
    out = tmp_path / "out"
    out.mkdir()
    trace = out / "torch.safetensors"
    line = one_line(run_limited([sys.executable, "-c", _RECORD, str(trace)], limit))
    assert line.startswith(limit_line(trace, limit)), line
    assert abs(needed(line) - full.stat().st_size) <= 64, line  # tensor bytes + header
    assert left_in(out) == []


#: Steps of the A1 runs through `burnside check`: a burn trace (~70 KB) well past the limit below.
STEPS = 30


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory) -> Path:
    """A1's PyTorch trace of STEPS steps, and train-step built (a check without a limit)."""
    from burnside.examples.a1 import record_torch
    from burnside.burn.locate import rust_workspace

    folder = tmp_path_factory.mktemp("full-disk-a1")
    path = record_torch(folder / "torch.safetensors", steps=STEPS, optim="sgd")
    proc = _check(path, folder / "unlimited")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rust_workspace().is_dir()
    return Path(path)


def _check(torch: Path, out_dir: Path, limit: int | None = None) -> subprocess.CompletedProcess:
    from burnside.burn.locate import rust_workspace

    command = [*CLI, "check", "--torch-trace", str(torch), "--burn-crate", str(rust_workspace() / "train-step"),
               "--bin", "train-step", "--out-dir", str(out_dir), "--", "--steps", str(STEPS)]
    if limit is None:
        return subprocess.run(command, capture_output=True, text=True, timeout=900)
    return run_limited(command, limit)


def _port_line(burn: Path, needed_bytes: int, why: str) -> str:
    return f"{burn}: {why}: {needed_bytes} bytes to write; nothing was written"


def test_the_rust_recorder_past_the_limit_names_the_path_and_the_bytes_and_removes_its_temporary(tmp_path, torch_trace):
    from burnside.burn.cargo import build
    from burnside.burn.locate import rust_workspace

    full = torch_trace.parent / "unlimited" / "train-step.burn.safetensors"
    init = torch_trace.parent / "unlimited" / "init.safetensors"
    binary = build(rust_workspace() / "train-step", bins=["train-step"]).executables["train-step"]
    limit = 32768
    assert full.stat().st_size > limit
    out = tmp_path / "out"
    out.mkdir()
    burn = out / "b.safetensors"
    proc = run_limited([str(binary), "--init", str(init), "-o", str(burn), "--steps", str(STEPS)], limit)
    assert proc.returncode == 1, proc.stderr  # the port's own error exit: it got EFBIG, not SIGXFSZ
    why = "larger than the file-size limit (ulimit -f) or the file system allows"
    assert proc.stderr == f"train-step: {_port_line(burn, full.stat().st_size, why)}\n"
    assert left_in(out) == []


def test_the_burn_ports_trace_past_the_limit_through_check_is_one_line_and_leaves_nothing(tmp_path, torch_trace):
    full = torch_trace.parent / "unlimited" / "train-step.burn.safetensors"
    init = torch_trace.parent / "unlimited" / "init.safetensors"
    # The init file burnside writes fits, and the build's state file (a few KB); the port's trace does not.
    limit = 32768
    assert init.stat().st_size < limit < full.stat().st_size
    out = tmp_path / "out"
    line = one_line(_check(torch_trace, out, limit))
    burn = out / "train-step.burn.safetensors"
    if "killed by SIGXFSZ" not in line:  # the port kept SIGXFSZ ignored, so it said which file and how much
        why = "larger than the file-size limit (ulimit -f) or the file system allows"
        assert _port_line(burn, full.stat().st_size, why) in line, line
    assert left_in(out) == ["init.safetensors"]  # complete, burnside's own input to the port; no trace, no .tmp


def test_the_init_file_past_the_limit_is_one_line_and_leaves_nothing(tmp_path, torch_trace):
    init = torch_trace.parent / "unlimited" / "init.safetensors"
    limit = 512
    assert init.stat().st_size > limit
    out = tmp_path / "out"
    line = one_line(_check(torch_trace, out, limit))
    assert line.startswith(limit_line(out / "init.safetensors", limit)), line
    assert needed(line) == init.stat().st_size, line
    assert not out.exists() or left_in(out) == []


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs: a disk that really fills up (ENOSPC). Skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def free_bytes(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def test_convert_onto_a_full_disk_is_one_line_naming_the_space_needed_and_free(tmp_path, small_tmpfs):
    src = big_trace(tmp_path / "src.safetensors", elements=400_000)  # 1.6 MB: more than the whole disk
    dst = small_tmpfs / "dst.safetensors"
    proc = subprocess.run([*CLI, "convert", str(src), str(dst)], capture_output=True, text=True, timeout=300)
    line = one_line(proc)
    assert line.startswith(f"error: {dst}: no space left on the device: "), line
    assert needed(line) == src.stat().st_size, line
    free = free_bytes(small_tmpfs)
    assert free > 0 and re.search(rf", {free} bytes \([\d.]+ [KM]iB\) free; nothing was written$", line), line
    assert left_in(small_tmpfs) == []


def test_the_burn_ports_trace_onto_a_full_disk_is_one_line_and_leaves_nothing(small_tmpfs, torch_trace):
    full = torch_trace.parent / "unlimited" / "train-step.burn.safetensors"
    filler = small_tmpfs / "filler"
    filler.write_bytes(b"\0" * (free_bytes(small_tmpfs) - 8192))  # two pages left: the init file fits, the trace not
    assert free_bytes(small_tmpfs) - 4096 < full.stat().st_size
    out = small_tmpfs / "out"
    line = one_line(_check(torch_trace, out))
    burn = out / "train-step.burn.safetensors"
    assert _port_line(burn, full.stat().st_size, "no space left on the device") in line, line
    assert left_in(out) == ["init.safetensors"]

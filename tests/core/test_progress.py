"""Progress: `recording pytorch: step k/N` and `comparing: tensor i/M` on a terminal, nothing elsewhere."""

from __future__ import annotations

import io
import itertools
import json
import struct
import subprocess
import sys
import textwrap

from rich.console import Console

from burnside.examples.a1 import record_reference, record_torch
from burnside.compare import compare_traces
from burnside.progress import Progress
from burnside.trace import open_trace


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120), out


def test_recording_shows_step_k_of_n_on_a_terminal(tmp_path):
    console, out = terminal()
    with Progress(console, delay=0) as progress:
        record_torch(tmp_path / "t.safetensors", steps=3, optim="sgd", progress=progress.steps("recording pytorch"))
        record_reference(tmp_path / "r.safetensors", steps=2, optim="adam",
                         progress=progress.steps("recording reference (float64)"))
    shown = out.getvalue()
    assert "recording pytorch: step 3/3" in shown
    # Adam's reference is two float64 runs: burn's constants, then PyTorch's
    assert "recording reference (float64), burn-adam variant: step 2/2" in shown
    assert "recording reference (float64): step 2/2" in shown


def _data_bytes(path) -> int:
    """A safetensors file's tensor bytes, each alias (format version 2) counted as its target's again: the file
    less its 8-byte length and JSON header, plus what the aliases stand for (compare reads them too)."""
    raw = path.read_bytes()
    (header,) = struct.unpack("<Q", raw[:8])
    entries = json.loads(raw[8:8 + header])  # a real header
    aliases = json.loads(entries["__metadata__"].get("aliases", "{}"))
    aliased = sum(entries[t]["data_offsets"][1] - entries[t]["data_offsets"][0] for t in aliases.values())
    return len(raw) - 8 - header + aliased


def test_compare_shows_tensor_i_of_m_and_bytes_done(tmp_path):
    a = record_torch(tmp_path / "a.safetensors", steps=2, optim="adam")
    calls = []
    comparison = compare_traces(open_trace(a), open_trace(a), progress=lambda *c: calls.append(c))
    m, total = len(comparison.rows), 2 * _data_bytes(a)
    assert calls[0] == (0, m, 0, total)
    assert calls[-1] == (m, m, total, total)
    assert [c[0] for c in calls] == list(range(m + 1))
    assert all(x[2] < y[2] for x, y in itertools.pairwise(calls))  # every tensor has bytes

    console, out = terminal()
    with Progress(console, delay=0) as progress:
        compare_traces(open_trace(a), open_trace(a), progress=progress.tensors())
    assert f"comparing: tensor {m}/{m}, {total / 2**20:.1f}/{total / 2**20:.1f} MiB" in out.getvalue()


def test_short_work_never_reaches_the_terminal(tmp_path):
    # A1's one step takes milliseconds: under DELAY its line would only flicker.
    console, out = terminal()
    with Progress(console) as progress:
        a = record_torch(tmp_path / "a.safetensors", steps=1, progress=progress.steps("recording pytorch"))
        compare_traces(open_trace(a), open_trace(a), progress=progress.tensors())
    assert "recording pytorch" not in out.getvalue()
    assert "comparing" not in out.getvalue()


def test_nothing_is_printed_when_stderr_is_not_a_terminal(tmp_path):
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        from rich.console import Console
        from burnside.examples.a1 import record_torch
        from burnside.compare import compare_traces
        from burnside.progress import Progress
        from burnside.trace import open_trace

        with Progress(Console(stderr=True), delay=0) as progress:
            steps, tensors = progress.steps("recording pytorch"), progress.tensors()
            a = record_torch(Path(sys.argv[1]), steps=3, progress=steps)
            compare_traces(open_trace(a), open_trace(a), progress=tensors)
        print(steps, tensors)
    """)
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a.safetensors")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "None None\n"  # no callbacks to call: the recorders skip them
    assert run.stderr == ""


def test_an_activity_off_a_terminal_speaks_only_every_so_often():
    out = io.StringIO()
    progress = Progress(Console(file=out, width=200), every=0)
    with progress:
        building = progress.activity("building the port")
        building.update("3 of about 9 crates (burn-core)")
        building.finish("cargo finished in 1 s")
    assert out.getvalue().splitlines() == ["building the port: 3 of about 9 crates (burn-core), 0 s",
                                           "building the port: cargo finished in 1 s"]

    quiet = io.StringIO()
    progress = Progress(Console(file=quiet, width=200), every=30)
    with progress:
        building = progress.activity("building the port")
        building.update("3 of about 9 crates (burn-core)")
        building.finish("cargo finished in 1 s")
    assert quiet.getvalue() == ""  # a short build says nothing, not even that it finished

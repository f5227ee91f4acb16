"""The burn side's progress: a port's steps (`burnside_trace::step_done`) and cargo's crates."""

from __future__ import annotations

import io

from rich.console import Console

from burnside import progress as progress_module
from burnside.burn.binary import run_binary
from burnside.burn.cargo import build_workspace
from burnside.burn.locate import rust_workspace
from burnside.burn.port import init_from_trace, record_port
from burnside.examples import cnn
from burnside.progress import Progress
from burnside.trace import open_trace


def test_a_port_reports_its_steps_when_asked(programs, tmp_path):
    torch = cnn.record_torch(tmp_path / "cnn.torch.safetensors", steps=2)
    steps = []
    record_port(torch, rust_workspace() / "cnn", cnn.BURN_BIN, ["--steps", "2"], tmp_path / "seen",
                progress=lambda *step: steps.append(step))
    assert steps == [(0, 2), (1, 2), (2, 2)]

    out = io.StringIO()
    with Progress(Console(file=out, force_terminal=True, width=120), delay=0) as progress:
        record_port(torch, rust_workspace() / "cnn", cnn.BURN_BIN, ["--steps", "2"], tmp_path / "drawn",
                    progress=progress.steps("running burn port"))
    assert "running burn port: step 2/2" in out.getvalue()


def test_a_port_run_by_hand_prints_no_progress(programs, tmp_path):
    torch = cnn.record_torch(tmp_path / "cnn.torch.safetensors", steps=2)
    init = init_from_trace(open_trace(torch), tmp_path / "init.safetensors")
    args = ["--init", str(init), "-o", str(tmp_path / "out.safetensors"), "--steps", "2"]
    quiet = run_binary(programs.executables["cnn"], args)
    assert "burnside-progress" not in quiet.stderr
    told = run_binary(programs.executables["cnn"], args, progress=lambda *step: None)
    assert "burnside-progress" not in told.stderr  # the step lines went to the callback
    assert told.json == quiet.json  # the same training either way


def test_cargo_off_a_terminal_says_how_far_it_is_only_every_so_often(programs, monkeypatch):
    quiet = io.StringIO()
    build_workspace(Console(file=quiet, width=200))
    assert quiet.getvalue() == ""  # a build that was done in seconds prints nothing on a pipe

    monkeypatch.setattr(progress_module, "EVERY", 0.0)
    chatty = io.StringIO()
    result = build_workspace(Console(file=chatty, width=200))
    lines = chatty.getvalue().splitlines()
    assert len(lines) == result.artifacts + 1
    assert lines[0].startswith("building burnside's burn programs: 1 of about ")
    assert lines[-1].startswith("building burnside's burn programs: cargo finished in ")


def test_cargo_on_a_terminal_shows_crate_by_crate(programs, monkeypatch):
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    out = io.StringIO()
    result = build_workspace(Console(file=out, force_terminal=True, width=200))
    shown = out.getvalue()
    assert "building burnside's burn programs: cargo finished in " in shown
    assert f"({result.artifacts} crates checked, " in shown

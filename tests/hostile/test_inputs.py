"""Inputs are regular files: a FIFO, a device or a directory gets one line, never a block or an endless read."""

from __future__ import annotations

import os
import sys

import pytest

from burnside.compare import Tolerance, load_tolerances
from burnside.errors import BurnsideError, TraceError
from burnside.trace import open_trace
from tests.core.conftest import run_cli


@pytest.mark.parametrize(("name", "kind"), [("t.json", "a FIFO \\(named pipe\\)"),
                                            ("t.safetensors", "a FIFO \\(named pipe\\)"),
                                            ("t", "a FIFO \\(named pipe\\)")])
def test_a_fifo_trace_is_refused_without_blocking(tmp_path, name, kind):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match=f"{name}: is {kind}, expected a trace file \\(a regular file\\)"):
        open_trace(fifo)


@pytest.mark.parametrize(("path", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device"),
                                            ("/dev/urandom", "a character device")])
def test_devices_are_refused_before_any_read(path, kind):
    with pytest.raises(TraceError, match=f"{path}: is {kind}, expected a trace file"):
        open_trace(path)
    with pytest.raises(BurnsideError, match=f"{path}: is {kind}, expected a tolerance file"):
        load_tolerances(path, Tolerance())


def test_a_directory_is_refused(tmp_path):
    (tmp_path / "d.json").mkdir()
    with pytest.raises(TraceError, match="d.json: is a directory, expected a trace file"):
        open_trace(tmp_path / "d.json")
    with pytest.raises(TraceError, match="init file"):
        open_trace(tmp_path / "d.json", kind="init")


def test_a_fifo_tolerance_file_is_refused(tmp_path):
    fifo = tmp_path / "tol.toml"
    os.mkfifo(fifo)
    with pytest.raises(BurnsideError, match="tol.toml: is a FIFO \\(named pipe\\), expected a tolerance file"):
        load_tolerances(fifo, Tolerance())


def test_the_cli_given_a_fifo_and_dev_zero_exits_2_in_one_line(tmp_path, st_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for args in (["compare", str(fifo), str(st_path)], ["compare", "/dev/zero", str(st_path)],
                 ["convert", "/dev/zero", str(tmp_path / "x.json")],
                 ["compare", str(st_path), str(st_path), "--tolerances", str(fifo)]):
        proc = run_cli(*args)  # run_cli's timeout turns a block into a failure, not a hung suite
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and "regular file" in lines[0], (args, proc.stderr)
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="non-UTF-8 file names are a POSIX matter")
def test_a_non_utf8_file_name_is_reported_not_a_crash(tmp_path):
    name = os.fsdecode(b"tr\xffce.json")
    with pytest.raises(TraceError, match="no such file"):
        open_trace(tmp_path / name)
    proc = run_cli("compare", str(tmp_path / name), str(tmp_path / name))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr

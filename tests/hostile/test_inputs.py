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


def test_a_file_that_is_no_trace_at_all_is_named_so(tmp_path):
    """A script or a pickle passed as a trace is not a corrupt trace: it is the wrong file."""
    script = tmp_path / "model.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(2, 2)\n")
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"\x80\x04\x95PK\x03\x04 pickled")
    for path in (script, checkpoint):
        proc = run_cli("compare", str(path), str(path))
        assert proc.returncode == 2
        assert proc.stderr == f"error: {path}: not a trace file (neither safetensors nor JSON); give the file " \
                              "burnside.torch.record wrote\n"


def test_check_refuses_a_bad_reference_before_building_the_port(tmp_path):
    from tests.core.conftest import a1_like_tensors, base_metadata
    from burnside.trace import write_trace

    torch_trace = write_trace(tmp_path / "t.safetensors", a1_like_tensors(), base_metadata())
    crate = tmp_path / "crate"
    crate.mkdir()
    (crate / "Cargo.toml").write_text('[package]\nname = "never-built"\nversion = "0.1.0"\n')
    for reference, says in ((tmp_path / "missing.safetensors", "missing.safetensors: no such file"),
                            (torch_trace, "is not a float64 reference trace")):
        proc = run_cli("check", "--torch-trace", str(torch_trace), "--burn-crate", str(crate), "--bin", "never-built",
                       "--out-dir", str(tmp_path / "out"), "--reference", str(reference))
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr
        assert "building" not in proc.stdout + proc.stderr and not (crate / "Cargo.lock").exists()

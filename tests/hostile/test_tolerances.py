"""Tolerances are finite, non-negative numbers and whole ulps, from the command line or a file."""

from __future__ import annotations

import numpy as np
import pytest

from burnside.compare import Tolerance, compare_traces, load_tolerances
from burnside.errors import BurnsideError
from burnside.trace import open_trace, write_trace
from tests.core.conftest import a1_like_tensors, base_metadata, run_cli


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"atol": float("nan")}, "tolerance atol=nan is not a finite number >= 0"),
    ({"rtol": float("nan")}, "tolerance rtol=nan is not a finite number >= 0"),
    ({"atol": -1e-6}, "tolerance atol=-1e-06 is not a finite number >= 0"),
    ({"atol": float("inf")}, "tolerance atol=inf is not"),
    ({"rtol": -float("inf")}, "tolerance rtol=-inf is not"),
    ({"atol": 10**400}, "tolerance atol=1000"),
    ({"atol": "1e-6"}, "tolerance atol='1e-6' is not"),
    ({"atol": True}, "tolerance atol=True is not"),
    ({"ulps": 1.9}, "tolerance ulps=1.9 is not a whole number"),
    ({"ulps": 2.0}, "tolerance ulps=2.0 is not a whole number"),
    ({"ulps": True}, "tolerance ulps=True is not a whole number"),
    ({"ulps": -1}, "tolerance ulps=-1 is not a whole number"),
    ({"ulps": 2**64}, "tolerance ulps=18446744073709551616 is not a whole number from 0 to 2\\^63-1"),
])
def test_an_invalid_tolerance_is_refused_naming_the_value(kwargs, message):
    with pytest.raises(BurnsideError, match=message):
        Tolerance(**kwargs)


def test_valid_tolerances_are_kept():
    assert Tolerance(atol=0, rtol=0.5, ulps=0) == Tolerance(0, 0.5, 0)
    assert Tolerance(atol=np.float32(1e-3), ulps=np.int64(4)).ulps == 4


def _tol_file(tmp_path, name: str, text: str | bytes):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize(("name", "text", "message"), [
    ("t.toml", "[default]\natol = nan\n", "\\[default\\] tolerance atol=nan is not a finite number"),
    ("t.toml", "[default]\natol = -inf\n", "\\[default\\] tolerance atol=-inf is not"),
    ("t.toml", "[default]\natol = -1.0\n", "\\[default\\] tolerance atol=-1.0 is not"),
    ("t.toml", '[tensors."*.loss"]\nrtol = inf\n', "\\[\\*.loss\\] tolerance rtol=inf is not"),
    ("t.toml", "[default]\nulps = 1.9\n", "\\[default\\] ulps must be a whole number, not 1.9"),
    ("t.toml", "[default]\nulps = true\n", "\\[default\\] ulps must be a whole number, not True"),
    ("t.toml", '[default]\natol = "1e-6"\n', "\\[default\\] atol must be a number, not '1e-6'"),
    ("t.toml", "[default]\natol = [1]\n", "\\[default\\] atol must be a number, not \\[1\\]"),
    ("t.toml", "[default]\nulps = inf\n", "\\[default\\] ulps must be a whole number, not inf"),
    ("t.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    ("t.toml", b"[default]\natol = 1e-6 # \xff\n", "is not UTF-8 \\(byte 0xff at offset 24\\)"),
    ("t.json", '{"default": {"atol": NaN}}', "bare NaN is not JSON"),
    ("t.json", '{"default": {"atol": 1e400}}', "number 1e400 is out of range"),
    ("t.json", '{"default": {"atol": ' + "1" * 5000 + "}}", "an integer of 5000 digits is out of range"),
    ("t.json", '{"default": {"atol": ' + "1" * 310 + "}}", "tolerance atol=1111"),
    ("t.json", '{"default": {"atol": 1e-6, "atol": 1}}', "duplicate key 'atol'"),
    ("t.json", '{"default": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested 100001 levels deep, more than the 64"),
    ("t.json", b'{"default": {"atol": 1e-6}}\xc3', "is not UTF-8"),
    ("t.json", '{"tensors": {"x": {"ulps": -2}}}', "\\[x\\] tolerance ulps=-2 is not a whole number"),
    ("t.json", '{"tensors": 5}', "\\[tensors\\] must map globs to tables"),
])
def test_a_bad_tolerance_file_is_one_clear_line(tmp_path, name, text, message):
    with pytest.raises(BurnsideError, match=message):
        load_tolerances(_tol_file(tmp_path, name, text), Tolerance())


def test_a_tolerance_file_beyond_the_size_bound_is_refused(tmp_path):
    path = _tol_file(tmp_path, "t.toml", "# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(BurnsideError, match="more than the 1048576 bytes a tolerance file may have"):
        load_tolerances(path, Tolerance())


def test_a_valid_file_still_loads_with_integer_atol_and_inherits_the_default(tmp_path):
    path = _tol_file(tmp_path, "t.toml", '[default]\natol = 0\n[tensors."*.grads.*"]\nulps = 4\n')
    tolerances = load_tolerances(path, Tolerance(atol=1e-6))
    assert tolerances.default == Tolerance(atol=0, rtol=0.0, ulps=None)
    assert tolerances.for_name("step0.grads.w") == Tolerance(atol=0, rtol=0.0, ulps=4)


def test_a_nan_tolerance_no_longer_passes_a_difference(tmp_path):
    t = a1_like_tensors()
    b = dict(t)
    b["step0.logits"] = t["step0.logits"] + np.float32(1e-3)
    a_path = write_trace(tmp_path / "a.safetensors", t, base_metadata())
    b_path = write_trace(tmp_path / "b.safetensors", b, base_metadata("burn"))
    assert not compare_traces(open_trace(a_path), open_trace(b_path)).passed
    for args in (["--tol", "nan"], ["--rtol", "nan"], ["--tol", "-1"], ["--tol", "inf"], ["--ulps", "-3"]):
        proc = run_cli("compare", str(a_path), str(b_path), *args)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        # click's usage error: the usage line, then the option and why
        assert lines[0].startswith("Usage: burnside compare") and lines[-1].startswith("Error: Invalid value for '--")
        assert "OK" not in proc.stdout, (args, proc.stderr)
    tol_file = _tol_file(tmp_path, "t.toml", "[default]\natol = nan\n")
    proc = run_cli("compare", str(a_path), str(b_path), "--tolerances", str(tol_file))
    assert proc.returncode == 2 and "atol=nan is not a finite number" in proc.stderr

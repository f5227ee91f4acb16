"""examples/pytest-parity, run as its README says: it passes on the faithful CNN port, and with a porting
bug built in (`--port-bug bn-eps`) it fails with compare's report naming the layer, not a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import burnside

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytest-parity"


@pytest.fixture
def run_sample(programs, tmp_path):
    """``run_sample(*args)``: `python -m pytest` in the sample project (its cache and temporary files
    kept out of it)."""

    def run(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--basetemp",
                               str(tmp_path / f"run{len(list(tmp_path.iterdir()))}"), *args],
                              check=False, capture_output=True, text=True, cwd=SAMPLE, env=env, timeout=900)

    return run


def burnsides_sources_in(out: str) -> list[str]:
    """The files of burnside's package (``burnside/testing.py``, ...) that ``out`` names: wherever the package
    is installed or checked out, and whatever the checkout's folder is called (pytest prints its rootdir, which
    is in the checkout: a clone into a folder named ``burnside`` puts ``burnside/`` in every line naming it)."""
    package = Path(burnside.__file__).resolve().parent
    names = {f"burnside/{path.relative_to(package).as_posix()}" for path in package.rglob("*.py")}
    return sorted(name for name in names if name in out) + [str(package)] * (str(package) in out)


def test_the_sample_passes_on_the_faithful_port(run_sample):
    proc = run_sample()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\b2 passed\b", proc.stdout), proc.stdout


def test_the_sample_fails_on_a_broken_port_naming_the_layer_without_burnsides_traceback(run_sample):
    proc = run_sample("--port-bug", "bn-eps")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert re.search(r"\b2 failed\b", out), out
    assert "FAILED tests/test_cnn_port.py::test_port_trains_like_pytorch - " in out
    assert "FAILED tests/test_cnn_port.py::test_first_forward_pass_within_1e_5 - " in out
    # the message, once for each test (pytest repeats its first line in the summary, all of it where $CI is set)
    assert len(re.findall(r"^E +AssertionError: ", out, re.MULTILINE)) == 2, out
    # with the float64 reference: the side that is off, from the layer the bug is in
    assert re.search(r"real difference: B \(burn\) is \S+ further from the float64 reference than the other "
                     r"side, from step0\.activations\.bn \(BatchNorm2d\) on", out), out
    # with a fixed tolerance: the first divergence, the layer before it agreeing
    assert ("first divergence: step0.activations.bn (BatchNorm2d, the layer before it, step0.activations.conv, "
            "agrees)") in out
    assert re.search(r"^E +step0\.activations\.bn +n=2048 .* FAIL$", out, re.MULTILINE)
    assert re.search(r"^E +worst=\S+ tol=1e-06 reference=\S+ .* FAIL$", out, re.MULTILINE)
    assert re.search(r"^E +worst=\S+ tol=1e-05 FAIL$", out, re.MULTILINE)
    # pytest's assertion report only: the test's own frame, none of burnside's
    frames = re.findall(r"^(\S+\.py):\d+: ", out, re.MULTILINE)
    assert frames == ["tests/test_cnn_port.py"] * 2, frames
    assert "Traceback" not in out, out
    assert burnsides_sources_in(out) == [], out

"""Every usage error is click's usage message and exit 2, through the installed console script and
through the app as tests invoke it, the same way; no traceback for any user error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from burnside import __version__
from burnside.cli import app

SCRIPT = Path(sys.executable).parent / "burnside"


def script(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    assert SCRIPT.is_file(), f"the console script is not installed at {SCRIPT}: pip install -e ."
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_version_prints_the_version():
    proc = script("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"burnside {__version__}"


USAGE_ERRORS = [
    (["--bogus"], "No such option '--bogus'"),
    (["compare", "--bogus"], "No such option '--bogus'"),
    (["compare"], "Missing argument 'A'"),
    (["check", "--rtol"], "Option '--rtol' requires an argument"),
    # an option check does not have is refused, not handed to the port: the port's own go after `--`
    (["check", "--torch-trace", "t.safetensors", "--burn-crate", ".", "--bin", "port", "--no-reference"],
     "No such option '--no-reference'"),
    (["compare", "a", "b", "--tol", "nan"], "nan is not a finite number >= 0"),
    (["compare", "a", "b", "--rtol", "-1"], "-1.0 is not a finite number >= 0"),
    (["compare", "a", "b", "--ulps", "1.9"], "'1.9' is not a valid integer"),
    (["run", "a1", "--steps", "99999999999999999999"], "--steps"),
    (["run", "a1", "--optim", "nesterov"], "'nesterov' is not one of"),
    (["lint", "--format", "xml"], "'xml' is not one of"),
    (["nope"], "No such command 'nope'"),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_usage_errors_are_clicks_message_and_exit_2(args, message):
    proc = script(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Usage: burnside" in proc.stderr and message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    via_app = CliRunner().invoke(app, args)
    assert via_app.exit_code == 2 and message in via_app.stderr


USER_ERRORS = [
    (["compare", "missing-a.json", "missing-b.json"], "error: missing-a.json: no such file"),
    (["explain", "X999"], "error: unknown rule X999; known rules: BS001"),
    (["run", "resnet"], "error: unknown target 'resnet'; known targets: a1"),
    (["run", "a1", "-o", "x.safetensors"], "error: -o names one trace file"),
    (["experiments", "run", "S99"], "error: unknown experiment 'S99'"),
]


@pytest.mark.parametrize(("args", "line"), USER_ERRORS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_user_errors_are_one_red_line_and_exit_2_both_ways(args, line, tmp_path):
    proc = script(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(line) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    import os

    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        via_app = CliRunner().invoke(app, args)
    finally:
        os.chdir(old)
    assert via_app.exit_code == 2 and via_app.stderr.startswith(line)
    assert via_app.exception is None or isinstance(via_app.exception, SystemExit)
    assert not (tmp_path / "burnside-out").exists()  # a refused run leaves nothing behind


def test_an_unwritable_output_is_one_line_exit_2(tmp_path):
    import numpy as np

    from burnside.trace import write_trace
    from tests.core.conftest import base_metadata

    src = write_trace(tmp_path / "t.json", {"step0.loss": np.array(1.0, np.float32)},
                      base_metadata() | {"params": [], "grads_len": [0]})
    proc = script("convert", str(src), str(tmp_path / "no-such-dir" / "t.safetensors"))
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr


def test_no_library_module_imports_the_cli_package():
    import ast

    root = Path(__file__).parents[2] / "src" / "burnside"
    offenders = []
    for path in root.rglob("*.py"):
        if path.is_relative_to(root / "cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "burnside.cli" or n.startswith("burnside.cli.") for n in names):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not offenders


def test_explain_wraps_its_prose_inside_the_panel():
    """Piped (no terminal), the panel is 80 columns and every paragraph is there whole, not cut at the border."""
    from tests.core.conftest import run_cli

    proc = run_cli("explain", "D009")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    prose = " ".join(line.strip("│ ") for line in lines)
    assert "names those that contradict the metadata" in " ".join(prose.split())

"""Ctrl-C (SIGINT) or SIGTERM at any point of `burnside compare`, `report`, `run` and `check`: one
line (`interrupted`, `stopped by SIGTERM`), exit 128 + the signal (130, 143), no traceback, no
partial output and no temporary file anywhere, and no burn program left running. Real processes:
the console script, signalled mid-run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from burnside.trace import open_trace, write_trace
from tests.signals import default_sigint

SCRIPT = Path(sys.executable).parent / "burnside"
LINES = {signal.SIGINT: "interrupted\n", signal.SIGTERM: "stopped by SIGTERM\n"}


def start(*args: str, cwd: Path) -> subprocess.Popen:
    assert SCRIPT.is_file(), f"the console script is not installed at {SCRIPT}: pip install -e ."
    # SIGINT as from a terminal, whatever this process was started with (a background job ignores it): tests/signals.py
    return subprocess.Popen([str(SCRIPT), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)


def stop(args: tuple[str, ...], cwd: Path, signum: int, after: float) -> tuple[int, str, str]:
    """Start `burnside ARGS` in ``cwd`` and signal it ``after`` seconds in. A machine quick enough to finish
    the command first has it run again, empty-handed, signalled at half the delay (up to five times): the
    test is of an interruption mid-run, which a fixed delay cannot promise on every machine's load."""
    for _ in range(5):
        proc = start(*args, cwd=cwd)
        deadline = time.monotonic() + after
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=60)
            if proc.returncode != 128 + signum and proc.returncode in (0, 1) and "Traceback" not in err:
                pass  # the signal came after the command's last word: it had finished, so run it again earlier
            else:
                return proc.returncode, out, err
        else:
            proc.communicate()
        for leftover in sorted(cwd.rglob("*"), reverse=True):  # what the finished run wrote
            leftover.rmdir() if leftover.is_dir() else leftover.unlink()
        after /= 2
    raise AssertionError(f"burnside {' '.join(args)} finished within {after * 2:.3f} s five times: "
                         "make its work larger")


def leftovers(root: Path) -> list[str]:
    """Temporary files (ours `.NAME.<hex>.tmp`, burnside-trace's `.NAME.<pid>.tmp`) under ``root``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def large_traces(tmp_path_factory) -> tuple[Path, Path]:
    """Two 128 MiB traces that differ everywhere: `compare` takes seconds on them."""
    root = tmp_path_factory.mktemp("large")
    rng = np.random.default_rng(0)
    params = [f"w{k}" for k in range(4)]
    tensors = {f"step0.params_before.{p}": rng.standard_normal((2048, 4096), dtype=np.float32) for p in params}
    meta = dict(framework="torch", framework_version="2", device="cpu", dtype="float32", steps=1,
                optimizer={"name": "sgd", "lr": 0.1}, params=params, grads_len=[4])
    a = write_trace(root / "a.safetensors", tensors, meta)
    b = write_trace(root / "b.safetensors", {k: v + np.float32(1e-3) for k, v in tensors.items()},
                    {**meta, "framework": "burn"})
    return a, b


@pytest.mark.parametrize("after", [0.4, 2.0])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_compare_writes_no_report_plot_or_junit(large_traces, tmp_path, signum, after):
    a, b = large_traces
    code, out, err = stop(("compare", str(a), str(b), "--report", "r.html", "--plot", "p.png", "--junit", "j.xml"),
                          tmp_path, signum, after)
    assert code == 128 + signum and err.endswith(LINES[signum]), err
    assert "Traceback" not in out + err
    # what is there was finished before the signal (said so, `plot: p.png`, or written just as it came): each
    # file complete, nothing temporary
    assert all(line.split(": ", 1)[0] in ("plot", "junit", "report") for line in err.splitlines()[:-1]), err
    assert leftovers(tmp_path) == []
    for path in tmp_path.iterdir():
        data = path.read_bytes()
        complete = {"p.png": data.endswith(b"IEND\xaeB`\x82"), "r.html": data.rstrip().endswith(b"</html>"),
                    "j.xml": data.rstrip().endswith(b"</testsuites>")}
        assert complete[path.name], path.name


def test_an_interrupted_report_writes_no_page(large_traces, tmp_path):
    a, b = large_traces
    code, out, err = stop(("report", str(a), str(b), "-o", "r.html"), tmp_path, signal.SIGINT, 1.5)
    assert (code, out, err) == (130, "", "interrupted\n")
    assert list(tmp_path.iterdir()) == []


def test_the_same_compare_uninterrupted_writes_every_output(large_traces, tmp_path):
    a, b = large_traces  # so the interrupted ones above are interrupted, not failing to write
    proc = subprocess.run([str(SCRIPT), "compare", str(a), str(b), "--report", "r.html", "--plot", "p.png",
                           "--junit", "j.xml"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.xml", "p.png", "r.html"]


@pytest.mark.parametrize("after", [1.0, 2.5, 4.0])
def test_an_interrupted_run_leaves_only_complete_traces(tmp_path, after):
    """`run a1` records PyTorch, the float64 reference, builds and runs the burn side, compares and
    plots: interrupted anywhere, what is left is complete (a trace opens, nothing temporary)."""
    code, out, err = stop(("run", "a1", "--steps", "3", "--out-dir", "out"), tmp_path, signal.SIGINT, after)
    assert (code, err) == (130, "interrupted\n")
    assert leftovers(tmp_path) == []
    for trace in (tmp_path / "out").rglob("*.safetensors"):
        open_trace(trace)  # complete, or it would not open


_STOP_IN_A_FINALIZER = """
import importlib, os, signal, sys, threading, time, weakref
app = importlib.import_module("burnside.cli.root")
for each in app._STOPPING:
    signal.signal(each, app._stop)
sys.unraisablehook = app._unraisable
class Node: pass
def finalizer(_):  # a weakref callback, as matplotlib's transforms run during garbage collection
    time.sleep(0.5)
node = Node()
ref = weakref.ref(node, finalizer)
threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
try:
    del node  # the signal comes while the callback sleeps: Python would swallow what it raises there
    time.sleep(5)
    print("ran on")
except app.Interrupted as stopped:
    print("stopped", stopped.signum)
"""


def test_a_stop_that_lands_in_a_finalizer_still_stops_the_run():
    # Python ignores an exception raised in a finalizer ("Exception ignored in ..."): seen in CI, where
    # SIGINT came while matplotlib's weakref callbacks ran and `compare` went on to write everything.
    done = subprocess.run([sys.executable, "-c", _STOP_IN_A_FINALIZER], capture_output=True, text=True, timeout=60)
    assert done.stdout == f"stopped {int(signal.SIGTERM)}\n" and done.stderr == "", (done.stdout, done.stderr)


def _interpreter_start() -> float:
    """Seconds this machine takes, now, to start and stop the interpreter with its site packages: a signal
    before that lands in Python's own start-up ("Fatal Python error: init_import_site"), before any
    burnside code can run."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - began


@pytest.mark.parametrize("after", [0.03, 0.06, 0.1, 0.2])
def test_a_stop_while_the_command_line_loads_is_one_line(large_traces, tmp_path, after):
    # The console script handles a stop from its first line, before click, rich and the commands are
    # imported (a tenth of a second): no KeyboardInterrupt traceback, no silent SIGTERM.
    a, b = large_traces
    started = 1.5 * _interpreter_start()
    proc = start("compare", str(a), str(b), cwd=tmp_path)
    time.sleep(started + after)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "interrupted\n"), (proc.returncode, err)
    assert leftovers(tmp_path) == []


def test_the_first_handler_says_what_the_command_line_says():
    import burnside.cli as cli
    from burnside.errors import STOPPING, stopped_line

    assert {s: cli._LINES[s].decode() for s in STOPPING} == {s: f"{stopped_line(s)}\n" for s in STOPPING}


STAND_IN = """\
import os, signal, time
os.kill(os.getpid(), signal.SIGINT)
deadline = time.monotonic() + 2
while time.monotonic() < deadline:  # Python code, where a handler's exception would be raised
    pass
open(os.environ["STAND_IN_DONE"], "w").close()
"""

CLI_IMPORTING_THE_STAND_IN = """\
import sys
import click
from burnside.cli import root

if sys.argv.pop(1) == "native":
    root._NATIVE_IMPORTS = root._NATIVE_IMPORTS | {"stand_in"}

@click.command()
def imports():
    import stand_in
    print("the import returned")

root.app = imports
root.main()
"""


@pytest.mark.parametrize("native", [True, False], ids=["native", "ordinary"])
def test_a_stop_during_a_native_import_waits_for_the_import_to_return(tmp_path, native):
    """torch's and triton's native modules run Python while they initialise, where a stop raised by the
    handler aborts the process (a C++ terminate, exit -6): during their import a stop is deferred and
    raised when it returns. A stand-in module signals itself mid-import; the ordinary import is the
    control, cut short where it was."""
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    done = tmp_path / "done"
    proc = subprocess.run([sys.executable, "-c", CLI_IMPORTING_THE_STAND_IN, "native" if native else "ordinary"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(tmp_path), "STAND_IN_DONE": str(done)})
    assert proc.returncode == 130 and proc.stderr == "interrupted\n", proc.stderr
    assert "the import returned" not in proc.stdout
    assert done.exists() == native


def test_torch_imported_by_the_console_script_is_torch_with_its_own_loader():
    """The deferring finder hands torch its own loader, so what torch reads through it (its resources,
    `__loader__`) is unchanged."""
    proc = subprocess.run([sys.executable, "-c", (
        "import sys\nfrom burnside.cli import root\nsys.meta_path.insert(0, root._DeferStopsInNativeImports())\n"
        "import torch, torch._dynamo\n"
        "print(type(torch.__loader__).__name__, type(torch.__spec__.loader).__name__, torch.ones(2).sum().item())")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["SourceFileLoader", "_DeferringLoader", "2.0"]

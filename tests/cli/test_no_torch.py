"""`burnside compare` and `check` never import torch: they compare two traces and run a built burn
program, and torch's import alone costs seconds (1.3-1.6 s on an idle 2-core machine, more under load),
more than the rest of a check of a small port. Real processes: the modules those commands run imported
in a fresh interpreter, and `compare` run through the console script's entry (`check` of a real port:
tests/burn/test_new_port.py). A torch import is reported with the import chain that made it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from burnside.trace import write_trace

#: Python run before the code under test: records the stack of a first `import torch` (or any torch
#: submodule) and, at exit, prints it on stderr after the marker line.
WATCH_TORCH = """\
import atexit, importlib.abc, sys, traceback
_torch_imports = []
class _WatchTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if (name == "torch" or name.startswith("torch.")) and not _torch_imports:
            _torch_imports.append("".join(traceback.format_stack()[:-1]))
        return None
sys.meta_path.insert(0, _WatchTorch())
def _report():
    if _torch_imports or "torch" in sys.modules:
        sys.stderr.write("TORCH IMPORTED\\n" + "".join(_torch_imports))
atexit.register(_report)
"""

#: The console script's own entry, with torch watched (what tests and benchmarks run as `burnside`).
BURNSIDE_WATCHING_TORCH = [sys.executable, "-c", WATCH_TORCH + "from burnside.cli import main\nmain()\n"]

#: What `compare` and `check` import: the command line and every module the two commands run, including
#: those imported when a command runs (the comparison, diagnoses, forensics, the outputs, the port's build).
MODULES = [
    "burnside.cli", "burnside.cli.root", "burnside.cli.check", "burnside.cli.compare", "burnside.cli.options",
    "burnside.cli.output", "burnside.pipeline", "burnside.compare", "burnside.diagnose", "burnside.forensics",
    "burnside.report", "burnside.report.html", "burnside.report.table", "burnside.trace", "burnside.burn",
    "burnside.burn.port", "burnside.burn.cargo", "burnside.burn.binary", "burnside.burn.freshness",
    "burnside.progress",
]


def torch_imported(stderr: str) -> str:
    """The import chain that imported torch, from a watched process's stderr ("" when none did)."""
    return stderr[stderr.index("TORCH IMPORTED"):] if "TORCH IMPORTED" in stderr else ""


def test_the_modules_compare_and_check_run_import_no_torch():
    code = WATCH_TORCH + "".join(f"import {module}\n" for module in MODULES)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not torch_imported(proc.stderr), proc.stderr


def _trace(path: Path, shift: float) -> Path:
    rng = np.random.default_rng(0)
    tensors = {name: rng.standard_normal(shape).astype(np.float32) + np.float32(shift)
               for name, shape in {"step0.params_before.w": (4, 3), "step0.logits": (2, 4), "step0.loss": ()}.items()}
    meta = dict(framework="torch" if shift == 0 else "burn", framework_version="2", device="cpu", dtype="float32",
                steps=1, optimizer={"name": "sgd", "lr": 0.1}, params=["w"], grads_len=[12])
    return write_trace(path, tensors, meta)


def test_a_compare_with_every_output_imports_no_torch(tmp_path):
    # a mismatch, so the diagnoses and forensics run too, with the table, JSON, plot, JUnit XML and report
    a, b = _trace(tmp_path / "a.safetensors", 0.0), _trace(tmp_path / "b.safetensors", 1e-3)
    for extra in ([], ["--json"]):
        proc = subprocess.run([*BURNSIDE_WATCHING_TORCH, "compare", str(a), str(b), "--plot", "p.png", "--junit",
                               "j.xml", "--report", "r.html", *extra], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "worst=" in proc.stdout or extra, proc.stdout
        assert not torch_imported(proc.stderr), proc.stderr

"""The pytest plugin in a user's own suite: a faithful port passes, a broken one fails with compare's report."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from burnside.burn.cargo import rust_workspace

USER_TESTS = textwrap.dedent('''
    import pytest

    from burnside.a1 import record_torch

    CALLS = []


    def record(path):
        CALLS.append(path)
        return record_torch(path, steps=2, optim="sgd")


    @pytest.mark.parity
    def test_faithful(burnside_parity):
        burnside_parity.check(record, crate=CRATE, bin="train-step", args=["--steps", "2"])


    @pytest.mark.parity
    def test_wrong_optimizer(burnside_parity):
        burnside_parity.check(record, crate=CRATE, bin="train-step", args=["--steps", "2", "--optim", "adam"])


    def test_pytorch_recorded_once():
        assert len(CALLS) == 1
''')


def test_plugin_passes_a_faithful_port_and_fails_a_broken_one_like_compare(programs, tmp_path):
    (tmp_path / "test_port.py").write_text(f"CRATE = {str(rust_workspace() / 'train-step')!r}\n" + USER_TESTS)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "2 passed, 1 failed" in out or "1 failed, 2 passed" in out, out
    assert "FAILED test_port.py::test_wrong_optimizer" in out
    assert "does not train like" in out and "first divergence: step0.params_after" in out
    assert "D005 optimizer configuration differs" in out  # the diagnosis names the cause, as compare does

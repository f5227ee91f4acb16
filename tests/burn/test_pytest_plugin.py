"""The pytest plugin in a user's own suite: a faithful port passes, a broken one fails with compare's report."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from burnside.burn.locate import rust_workspace

USER_TESTS = textwrap.dedent('''
    import pytest

    from burnside.examples.a1 import record_reference, record_torch

    CALLS = []


    def record(path):
        CALLS.append(path)
        return record_torch(path, steps=2, optim="sgd")


    def reference(path):
        CALLS.append(path)
        return record_reference(path, steps=2, optim="sgd")


    @pytest.mark.parity
    def test_faithful(burnside_parity):
        burnside_parity.check(record, crate=CRATE, bin="train-step", args=["--steps", "2"])


    @pytest.mark.parity
    def test_faithful_judged_by_the_reference(burnside_parity):
        burnside_parity.check(record, reference=reference, crate=CRATE, bin="train-step", args=["--steps", "2"])


    @pytest.mark.parity
    def test_wrong_optimizer(burnside_parity):
        burnside_parity.check(record, crate=CRATE, bin="train-step", args=["--steps", "2", "--optim", "adam"])


    @pytest.mark.parity
    def test_wrong_optimizer_judged_by_the_reference(burnside_parity):
        burnside_parity.check(record, reference=reference, crate=CRATE, bin="train-step",
                              args=["--steps", "2", "--optim", "adam"])


    @pytest.mark.parity
    def test_not_a_crate(burnside_parity, tmp_path):
        burnside_parity.check(record, crate=tmp_path, bin="train-step")


    def test_each_side_recorded_once():
        assert [p.name for p in CALLS] == ["torch-0.safetensors", "reference-1.safetensors"]
''')


def test_plugin_passes_a_faithful_port_and_fails_a_broken_one_like_compare(programs, tmp_path):
    (tmp_path / "test_port.py").write_text(f"CRATE = {str(rust_workspace() / 'train-step')!r}\n" + USER_TESTS)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          check=False, capture_output=True, text=True, cwd=tmp_path, timeout=900)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "3 failed, 3 passed" in out, out
    assert "FAILED test_port.py::test_wrong_optimizer -" in out
    assert "does not train like" in out and "first divergence: step0.params_after" in out
    assert "D005 optimizer configuration differs" in out  # the diagnosis names the cause, as compare does
    # With the float64 reference the verdict names the side that is off, from the same tensor.
    assert "FAILED test_port.py::test_wrong_optimizer_judged_by_the_reference -" in out
    assert "real difference: B (burn) is" in out and "from step0.params_after." in out
    # A port that cannot be built is burnside's one line, not a traceback through burnside.
    assert "FAILED test_port.py::test_not_a_crate - Failed: burnside: " in out and "no Cargo.toml" in out
    assert "burnside/pytest_plugin.py" not in out and "burnside/testing.py" not in out

"""The PyTorch-side experiments run from one command and check the page's claims."""

from __future__ import annotations

from burnside.experiments import all_experiments

from .conftest import run_cli


def test_s5_one_moves_prints_the_page_and_every_claim_holds(tmp_path):
    proc = run_cli("experiments", "run", "S5", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "fc2.bias before          [-0.0, -0.019999999552965164, -0.03999999910593033]" in out
    assert "clone taken before step  [-0.0, -0.019999999552965164, -0.03999999910593033]" in out
    assert "same object, same buffer: True True" in out
    assert "other fc2.bias changed by opt.step(): False" in out
    assert "model params have grad: [False, False, False, False]" in out
    assert out.count("✓") == 5 and "✗" not in out


def test_s10_step_helper_losses(tmp_path):
    proc = run_cli("experiments", "run", "s10", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "losses [1.14005" in proc.stdout
    assert "✓ losses strictly decrease: true" in proc.stdout


def test_unknown_experiment_is_one_line_exit_2(tmp_path):
    proc = run_cli("experiments", "run", "S99", "--out-dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: unknown experiment 'S99'")


def test_registry_ids_are_unique_and_ordered():
    ids = [e.id for e in all_experiments()]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids, key=lambda i: int(i[1:]))
    assert {"S5", "S10"} <= set(ids)

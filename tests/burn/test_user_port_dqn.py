"""A DQN update ported by following only the README, as a new user ports it: an online Q-network (an MLP,
obs 8 -> 4 actions), a frozen target network that starts as its copy, a replay batch per step (obs, action,
reward, next_obs, done), the SmoothL1 (beta 1) TD loss of Q(obs, action) against
reward + 0.99 * max_a target(next_obs) * (1 - done), RMSprop(lr=1e-3), 3 steps.

The PyTorch side (`user_ports/dqn/record.py`) records with `record(..., target=None, loss_fn=TDLoss(model))`,
the loss an `nn.Module` holding the target network; the burn port (`user_ports/dqn/src/main.rs`) loads the
target network as a module of its own from the online network's starting weights, frozen with `no_grad()`,
and takes `--bug NAME` to build one porting slip in. Each case records once, runs `burnside check` and reads
the verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.burn.user_port_harness import Checks, diagnoses, project, verdict


@pytest.fixture(scope="module")
def dqn(programs, tmp_path_factory) -> Path:
    return project("dqn", tmp_path_factory.mktemp("user-ports"))


run = Checks()


def test_the_recorded_loss_names_the_td_module_and_its_smooth_l1_call(dqn):
    from burnside.trace import open_trace

    meta = open_trace(dqn / "traces" / "torch.safetensors").metadata
    assert meta["loss_fn"] == "TDLoss" and meta["loss_input"] == "batch", meta
    assert meta["loss_call"] == {"fn": "smooth_l1_loss", "reduction": "mean", "beta": 1.0}, meta
    # the target network lives in the loss: it is not the recorded model, so its parameters are not recorded
    assert meta["params"] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"], meta


def test_the_faithful_dqn_is_ok_with_no_diagnosis(dqn):
    proc = run(dqn, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" OK"), proc.stdout
    assert not diagnoses(proc), proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith(("only in A:", "only in B:"))], proc.stdout


DQN_BUGS = [
    # burn's HuberLoss with delta 0.5 where PyTorch's SmoothL1 has beta 1: measured from the loss call's inputs
    ("huber-half", "D017", ["SmoothL1 with beta 1", "Huber with delta 0.5",
                            "step0.loss differs while step 0's logits agree"]),
    # burn's RmsPropConfig::new() defaults (momentum 0.9, epsilon 1e-5) where torch.optim.RMSprop has 0 and 1e-8
    ("rmsprop-defaults", "D005", ["momentum: pytorch 0.0, burn 0.9", "eps: pytorch 1e-08, burn 1e-05"]),
    # the (1 - done) mask left out of the TD target: the loss parts at step 0 while the Q-values agree
    ("no-done-mask", "D010", ["step0.loss differs while step 0's logits agree"]),
    # the TD target from the online network: the two networks are equal at step 0, so the loss parts at step 1
    ("online-target", "D010", ["step1.loss differs while step 1's logits agree"]),
    # the target network a field of the trained module, neither frozen nor detached: the optimizer steps it
    ("target-trained", "D012", ["gradients for 12 parameters at step 0, pytorch for 6",
                                "pytorch has none for target.fc1.bias", "so it never updates them"]),
]


@pytest.mark.parametrize(("bug", "rule", "words"), DQN_BUGS, ids=[case[0] for case in DQN_BUGS])
def test_each_dqn_slip_fails_with_the_rule_that_names_it(dqn, bug, rule, words):
    proc = run(dqn, bug)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" FAIL"), proc.stdout
    found = diagnoses(proc)
    assert found and found[0].startswith(f"{rule} "), found
    for word in words:
        assert word in found[0], (word, found)
    # a slip of the loss or the target network is never read as the optimizer doing other than declared
    if rule != "D005":
        assert not [line for line in found if line.startswith(("D005 ", "D009 "))], found


# A TD target that differs: the loss function is the same SmoothL1 beta 1 on both sides; D010 says the loss's
# input and target differ (PyTorch's loss is its smooth_l1_loss of what it was given, the port's is not) and
# the fix names the TD target, never the reduction or label smoothing.
WRONG_TARGET = ["no-done-mask", "online-target"]


@pytest.mark.parametrize("bug", WRONG_TARGET)
def test_a_wrong_td_target_is_named_as_the_loss_target(dqn, bug):
    proc = run(dqn, bug)
    first = diagnoses(proc)[0]
    assert first.startswith("D010 "), first
    assert "target" in first and "the loss function differs" not in first, first
    assert "1x the other's" not in proc.stdout and "TD target's discount" in proc.stdout, proc.stdout


def test_the_smooth_l1_fix_is_rust_that_compiles(dqn):
    proc = run(dqn, "huber-half")
    fixes = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("fix:")]
    assert fixes and "SmoothL1LossConfig::new().with_beta(1.0)" in fixes[0], fixes

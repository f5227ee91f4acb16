"""`burnside.testing.assert_parity` in a user's own tests: silent when the port agrees, a message that
reads like `burnside compare` when it does not."""

from __future__ import annotations

import numpy as np
import pytest

from burnside.testing import assert_parity

from .conftest import a1_like_tensors


def test_a_faithful_port_passes_and_returns_the_comparison(write):
    t = a1_like_tensors()
    a_path, b_path = write("a.safetensors", t), write("b.safetensors", dict(t), "burn")
    comparison = assert_parity(b_path, a_path)
    assert comparison.passed and comparison.worst == 0.0


def test_a_diverging_port_raises_with_the_failing_rows_the_divergence_and_the_diagnosis(write):
    t = a1_like_tensors()
    b = dict(t)
    for p in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):  # updates that never land
        b[f"step0.params_after.{p}"] = t[f"step0.params_before.{p}"]
    with pytest.raises(AssertionError) as caught:
        a_path, b_path = write("a.safetensors", t), write("b.safetensors", b, "burn")
        assert_parity(b_path, a_path)
    message = str(caught.value)
    assert "first divergence: step0.params_after.fc1.weight" in message
    assert "D001 optimizer step result discarded" in message and "fix:" in message
    assert "params_after.fc1.weight" in message and "FAIL" in message
    assert "grads.fc1.weight" not in message  # rows within tolerance are left out
    assert "worst=" in message


def test_a_plain_number_is_the_absolute_tolerance(write):
    t = a1_like_tensors()
    b = dict(t)
    b["step0.logits"] = t["step0.logits"] + np.float32(1e-4)
    a_path, b_path = write("a.safetensors", t), write("b.safetensors", b, "burn")
    with pytest.raises(AssertionError, match="step0.logits"):
        assert_parity(b_path, a_path)
    assert assert_parity(b_path, a_path, tolerances=1e-3).passed

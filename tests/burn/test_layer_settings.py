"""D011 on the worked examples' real burn ports: each `--bug` that builds a layer with other settings is
named with both sides' measured values, measured from the input PyTorch recorded feeding the layer
(`layer_inputs`), a faithful port draws nothing, and a LayerNorm fed by a residual sum is measured from
that input too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from burnside.pipeline import compare_with_evidence
from burnside.compare.tolerance import Tolerance, Tolerances
from burnside.diagnose import diagnose

STEPS = 2
TOLERANCES = Tolerances(Tolerance(atol=1e-5))


@pytest.fixture(scope="module")
def compared(example_run):
    """``compared(name, bug=None) -> (Comparison, D011 diagnoses)``, each side recorded once."""
    cache: dict = {}

    def get(name: str, bug: str | None = None):
        if (name, bug) not in cache:
            comparison = compare_with_evidence(*example_run(name, STEPS, bug), TOLERANCES)
            cache[name, bug] = comparison, [d for d in diagnose(comparison) if d.rule == "D011"]
        return cache[name, bug]

    return get


def test_batchnorm_epsilon_1e3_is_measured_on_burn(compared):
    comparison, (found,) = compared("cnn", "bn-eps")
    layer = comparison.evidence.layer
    assert (layer.module, layer.kind, layer.step, layer.input) == ("bn", "BatchNorm2d", 0, "step0.layer_inputs.bn")
    assert layer.measured["a"]["epsilon"] == pytest.approx(1e-5, rel=0.02)
    assert layer.measured["b"]["epsilon"] == pytest.approx(1e-3, rel=0.02)
    assert [d[0] for d in layer.differing()] == ["epsilon"], "the momentum was measured equal"
    assert found.evidence.startswith("bn (BatchNorm2d) at step 0: epsilon measured 1e-5 on A (pytorch), 0.001 on "
                                     "B (burn)")
    assert "`BatchNormConfig::new(channels).with_epsilon(1e-5)`" in found.fix


def test_batchnorm_momentum_09_is_measured_from_burns_running_mean(compared):
    comparison, (found,) = compared("cnn", "bn-momentum")
    assert comparison.first_divergence.name == "step0.buffers.bn.running_mean"
    measured = comparison.evidence.layer.measured
    assert measured["a"]["momentum"] == pytest.approx(0.1, abs=1e-5)
    assert measured["b"]["momentum"] == pytest.approx(0.9, abs=1e-5)
    assert measured["b"]["epsilon"] == pytest.approx(1e-5, rel=0.02)
    assert "momentum measured 0.1 on A (pytorch), 0.9 on B (burn)" in found.evidence
    assert "with_momentum(0.1)" in found.fix


def test_gelu_tanh_approximation_is_named_on_burn(compared):
    comparison, (found,) = compared("transformer", "gelu-tanh")
    layer = comparison.evidence.layer
    assert (layer.module, layer.kind, layer.input) == ("mlp.act", "GELU", "step0.layer_inputs.mlp.act")
    assert layer.measured == {"a": {"gelu": "erf"}, "b": {"gelu": "tanh"}}
    assert max(layer.residuals["a"]["erf"], layer.residuals["b"]["tanh"]) < 1e-6
    assert min(layer.residuals["a"]["tanh"], layer.residuals["b"]["erf"]) > 1e-4
    assert "B (burn) the tanh approximation" in found.evidence
    assert "`burn::tensor::activation::gelu`" in found.fix


def test_an_lstm_reading_batch_first_is_named_against_pytorchs_sequence_first(compared):
    comparison, (found,) = compared("rnn", "batch-first")
    layer = comparison.evidence.layer
    assert (layer.module, layer.kind, layer.step, layer.input) == ("lstm", "LSTM", 0, "step0.layer_inputs.lstm")
    assert layer.measured == {"a": {"layout": "seq-first"}, "b": {"layout": "batch-first"}}
    # each side's own reading reproduces it to rounding, the other one is off by the output's size
    assert max(layer.residuals["a"]["seq-first"], layer.residuals["b"]["batch-first"]) < 1e-6
    assert min(layer.residuals["a"]["batch-first"], layer.residuals["b"]["seq-first"]) > 0.1
    assert found.evidence.startswith("lstm (LSTM) at step 0: A (pytorch) reads [seq, batch, features]")
    assert "with_batch_first(false)" in found.fix


def test_ln2_is_fed_by_a_residual_sum_and_measured_from_what_it_was_fed(compared):
    """`--bug ln-eps` sets ln2's epsilon; ln2 reads emb + attn, while the activation before it is attn: the
    input PyTorch recorded feeding it is the sum, and the epsilon is measured from it."""
    comparison, found = compared("transformer", "ln-eps")
    assert comparison.first_divergence.name == "step0.activations.ln2"
    layer = comparison.evidence.layer
    assert (layer.module, layer.input, layer.input_is_before) == ("ln2", "step0.layer_inputs.ln2", False)
    assert [d[0] for d in layer.differing()] == ["epsilon"] and found, layer.measured


@pytest.mark.parametrize("name", ["cnn", "transformer", "rnn"])
def test_faithful_ports_draw_no_d011(compared, example_run, name):
    comparison, found = compared(name)
    assert not found
    if name == "cnn":
        # burn's biased running_var is the first row out of tolerance: the layer is measured and agrees
        assert comparison.first_divergence.name == "step0.buffers.bn.running_var"
        measured = comparison.evidence.layer.measured
        for side in "ab":
            assert measured[side]["epsilon"] == pytest.approx(1e-5, rel=0.02)
            assert measured[side]["momentum"] == pytest.approx(0.1, abs=1e-5)
        assert not comparison.evidence.layer.differing()
    else:
        assert comparison.passed and comparison.evidence.layer is None
    if name == "rnn":
        # both recurrent layers re-run from the traces read time on the first axis, on both sides
        from burnside.compare.layers.settings import measure_layer

        for module in ("gru", "lstm"):
            layer = measure_layer(*example_run(name, STEPS), f"step1.activations.{module}")
            assert layer.measured == {"a": {"layout": "seq-first"}, "b": {"layout": "seq-first"}}, module


def test_a1_draws_no_d011(a1_trace):
    comparison = compare_with_evidence(a1_trace("torch", "sgd", 2), a1_trace("burn", "sgd", 2))
    assert comparison.passed and comparison.evidence.layer is None
    assert not [d for d in diagnose(comparison) if d.rule == "D011"]


def test_run_names_the_batchnorm_epsilon_with_the_float64_reference(programs, tmp_path):
    """The CLI's path: `burnside run cnn --bug bn-eps` judges by the float64 reference, then diagnoses."""
    command = [sys.executable, "-c", "from burnside.cli import main; main()", "run", "cnn", "--bug", "bn-eps",
               "--steps", str(STEPS), "--json"]
    proc = subprocess.run(command, check=False, capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["first_divergence"] == "step0.activations.bn" and doc["first_divergence_side"] == "b"
    (found,) = [d for d in doc["diagnosis"] if d["rule"] == "D011"]
    assert "epsilon measured 1e-5 on A (pytorch), 0.001 on B (burn)" in found["evidence"]

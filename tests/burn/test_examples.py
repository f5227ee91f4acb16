"""The worked examples (a CNN with BatchNorm, a transformer block, a GRU and LSTM language model): PyTorch
recorded, the burn port run through the `burnside check` contract, compared; each injected layer bug surfaces
at its own layer."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from burnside.burn.locate import target_dir
from burnside.pipeline import compare_with_evidence
from burnside.compare.tolerance import Tolerance, Tolerances
from burnside.examples import cnn
from burnside.torch import export_init
from burnside.trace import parse_name

STEPS = 4
#: f32 kernels of two frameworks: activations, gradients and moments agree to a few 1e-6 here.
TOLERANCES = Tolerances(Tolerance(atol=1e-5))


@pytest.fixture
def run_example(example_run):
    """``run_example(name, bug=None) -> (torch trace, burn trace)`` for STEPS steps."""
    return lambda name, bug=None: example_run(name, STEPS, bug)


def table(comparison) -> str:
    """The comparison as the test output shows it when an assertion fails."""
    return "\n".join(f"{r.name} max_abs={r.stats.max_abs:.3g} out_of_tol={r.stats.out_of_tol}"
                     for r in comparison.rows if not r.passed) + f"\nworst={comparison.worst:.3g}"


def test_transformer_port_trains_the_same(run_example):
    torch_trace, burn_trace = run_example("transformer")
    comparison = compare_with_evidence(torch_trace, burn_trace, TOLERANCES)
    assert comparison.passed, table(comparison)
    assert comparison.worst < 1e-5
    activations = [r.name for r in comparison.rows if r.stage == "activations" and r.name.startswith("step0.")]
    assert activations == [f"step0.activations.{m}" for m in torch_trace.metadata["activations"]], \
        "every module the PyTorch model runs, in execution order"
    assert torch_trace.metadata["modules"]["ln2"] == "LayerNorm"
    # burn's LayerNorm gamma/beta were loaded from and recorded as PyTorch's weight/bias.
    assert "step3.params_after.ln2.weight" in burn_trace


def test_rnn_port_trains_the_same_with_pytorchs_packed_gates(run_example):
    torch_trace, burn_trace = run_example("rnn")
    comparison = compare_with_evidence(torch_trace, burn_trace, TOLERANCES)
    assert comparison.passed, table(comparison)
    assert not comparison.only_in_a and not comparison.only_in_b and not comparison.structure
    # burn's per-gate Linears were loaded from and recorded as PyTorch's packed tensors, gradients and
    # Adam's moments included, and counted as PyTorch counts them
    packed = ("params_after.gru.weight_ih_l0", "grads.lstm.weight_hh_l0_reverse", "optim.exp_avg_sq.lstm.bias_ih_l0")
    for name in packed:
        assert burn_trace.info(f"step3.{name}").shape == torch_trace.info(f"step3.{name}").shape
    assert burn_trace.info("step0.grads.lstm.weight_ih_l0").shape == (4 * 16, 16)
    assert burn_trace.metadata["grads_len"] == torch_trace.metadata["grads_len"] == [15] * STEPS
    assert sorted(burn_trace.metadata["params"]) == sorted(torch_trace.metadata["params"])
    assert torch_trace.metadata["modules"]["lstm"] == "LSTM"


def test_attention_port_loads_and_records_pytorchs_packed_in_proj(run_example):
    torch_trace, burn_trace = run_example("attention")
    comparison = compare_with_evidence(torch_trace, burn_trace, TOLERANCES)
    # Only the key projection's bias differs (rows 16..31 of in_proj_bias): its gradient is exactly zero in exact
    # arithmetic (softmax ignores a constant added to every score of a query), and AdamW turns each side's own
    # rounding of it into lr-sized moves; with the float64 reference it is named as such and the run is OK
    # (test_with_the_float64_reference_the_attention_port_passes).
    for row in comparison.failed_rows:
        assert row.name.split(".", 1)[1] in ("params_after.attn.in_proj_bias", "params_before.attn.in_proj_bias"), \
            table(comparison)
        assert 16 <= row.stats.worst_index < 32, (row.name, row.stats.worst_index)
    assert comparison.failed_rows, "the key bias noise this test is about"
    assert not comparison.only_in_a and not comparison.only_in_b and not comparison.structure
    assert burn_trace.info("step0.grads.attn.in_proj_weight").shape == (48, 16)
    assert burn_trace.info("step0.params_after.attn.out_proj.weight").shape == (16, 16)
    assert torch_trace.metadata["modules"]["attn"] == "MultiheadAttention"


def test_rnn_clipping_is_declared_by_both_sides_and_each_clipping_slip_is_named(run_example):
    from burnside.diagnose import diagnose
    from burnside.examples import rnn

    torch_trace, burn_trace = run_example("rnn")
    assert torch_trace.optimizer["clip_grad_norm"] == burn_trace.optimizer["clip_grad_norm"] == rnn.CLIP
    faithful = compare_with_evidence(torch_trace, burn_trace, TOLERANCES)
    assert not [d.rule for d in diagnose(faithful) if d.rule in ("D005", "D009")]
    # the port forgets the clip_grad_norm_ line: the declarations differ
    comparison = compare_with_evidence(*run_example("rnn", "no-clip"), TOLERANCES)
    assert not comparison.passed
    (d005,) = [d for d in diagnose(comparison) if d.rule == "D005"]
    assert d005.evidence == f"clip_grad_norm: pytorch {rnn.CLIP!r}, burn none"
    # burn's own per-tensor clipping, declared as clip_grad_norm: the updates show it is not that
    comparison = compare_with_evidence(*run_example("rnn", "per-tensor-clip"), TOLERANCES)
    (d009,) = [d for d in diagnose(comparison) if d.rule == "D009"]
    assert d009.evidence.startswith("burn (")
    assert f"the trace says clip_grad_norm {rnn.CLIP:g}; its updates show no clipping" in d009.evidence
    assert "GradientClippingConfig::Norm" in d009.fix


def test_cnn_port_differs_only_in_batchnorm_running_var(run_example):
    torch_trace, burn_trace = run_example("cnn")
    comparison = compare_with_evidence(torch_trace, burn_trace, TOLERANCES)
    failed = [r.name for r in comparison.failed_rows]
    assert failed == [f"step{k}.buffers.bn.running_var" for k in range(STEPS)], table(comparison)
    # burn keeps no count of batches: listed as not recorded, not a failure; everything else is on both sides.
    # B records neither num_batches_tracked (burn keeps none) nor what each layer and the loss function were fed
    assert [n for n in comparison.unrecorded_in_b if ".layer_inputs." not in n and ".loss_inputs." not in n] == \
        [f"step{k}.buffers.bn.num_batches_tracked" for k in range(STEPS)]
    assert not comparison.only_in_a
    assert not comparison.only_in_b and not comparison.structure
    assert "step0.buffers.bn.running_mean" in {r.name for r in comparison.rows if r.passed}
    # The known difference: burn 0.22.1 updates running_var with the biased batch variance,
    # PyTorch with the unbiased one. From the initial 1 with momentum 0.1, after one batch of
    # n = 8 images x 8 x 8 = 512 elements per channel: torch - 0.9 = (burn - 0.9) * n / (n - 1).
    n = 8 * 8 * 8
    burn_var = burn_trace.values("step0.buffers.bn.running_var").astype(np.float64)
    torch_var = torch_trace.values("step0.buffers.bn.running_var").astype(np.float64)
    np.testing.assert_allclose(torch_var - 0.9, (burn_var - 0.9) * n / (n - 1), rtol=1e-5)
    assert np.all(np.abs(torch_var - burn_var) > 1e-5)


def first_out_of_tolerance(comparison):
    """The first activation or buffer out of tolerance, in pipeline order, and the activation before it."""
    rows = [r for r in comparison.rows if r.stage in ("activations", "buffers")]
    index = next(i for i, r in enumerate(rows) if not r.passed and not r.name.endswith("running_var"))
    before = rows[index - 1] if index and rows[index - 1].stage == "activations" else None
    return rows[index], before


@pytest.mark.parametrize(("name", "bug", "layer", "module", "input_layer"), [
    ("transformer", "gelu-tanh", "step0.activations.mlp.act", "GELU", "step0.activations.mlp.fc1"),
    ("transformer", "ln-eps", "step0.activations.ln2", "LayerNorm", "step0.activations.attn"),
    ("cnn", "bn-eps", "step0.activations.bn", "BatchNorm2d", "step0.activations.conv"),
    ("cnn", "bn-momentum", "step0.buffers.bn.running_mean", None, None),
    ("rnn", "batch-first", "step0.activations.lstm", "LSTM", "step0.activations.gru"),
    ("attention", "dropout", "step0.activations.attn", "MultiheadAttention", "step0.activations.emb"),
])
def test_a_layer_bug_is_first_seen_at_that_layer(run_example, name, bug, layer, module, input_layer):
    torch_trace, burn_trace = run_example(name, bug)
    comparison = compare_with_evidence(torch_trace, burn_trace, TOLERANCES)
    first, before = first_out_of_tolerance(comparison)
    assert first.name == layer, table(comparison)
    if module is not None:
        assert torch_trace.metadata["modules"][parse_name(first.name).module] == module
        assert before is not None and before.name == input_layer and before.passed, "its input still agreed"
    else:
        # A momentum changes no output of a training-mode forward pass, only the running statistics.
        assert all(r.passed for r in comparison.rows if r.stage == "activations")


def test_a_port_that_does_not_fit_the_init_lists_every_name(run_example, tmp_path):
    run_example("transformer")  # builds the bins
    cnn_init = export_init(*cnn.model_and_batch(), tmp_path / "cnn.init.safetensors")
    proc = subprocess.run([str(target_dir() / "release" / "transformer"), "--init", str(cnn_init), "-o",
                           str(tmp_path / "out.safetensors")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert not (tmp_path / "out.safetensors").exists()
    message = proc.stderr
    assert "15 burn tensor(s) not in the file" in message
    assert "7 tensor(s) of the file used by no burn tensor" in message
    assert "`ln1.gamma` -> `ln1.weight`" in message, "the PyTorch name of burn's gamma"
    assert "`bn.running_var`" in message, "buffers too; PyTorch's num_batches_tracked has no burn counterpart"
    assert "num_batches_tracked" not in message
    assert "fix:" in message and "TorchNames" in message


def test_a_bad_command_line_is_a_usage_error(run_example, tmp_path):
    run_example("cnn")
    proc = subprocess.run([str(target_dir() / "release" / "cnn"), "-o", str(tmp_path / "o.safetensors")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("cnn: missing --init INIT (usage: BIN --init INIT -o OUT "
                                   "[--steps N | --batches N] [ARGS...])")


def _run_json(name: str, tmp_path, *args: str) -> dict:
    import json
    import sys

    proc = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "run", name, "--steps",
                           str(STEPS), "--json", *args], capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_with_the_float64_reference_the_faithful_cnn_passes_and_burns_batchnorm_is_named(programs, tmp_path):
    doc = _run_json("cnn", tmp_path)
    assert doc["passed"], [r["name"] for r in doc["tensors"] if not r["passed"]]
    (difference,) = doc["framework_differences"]
    assert difference["side"] == "b" and difference["variant"] == "burn-adam+burn-batchnorm"
    assert "biased batch variance" in difference["title"]
    assert difference["detected_at"] == "step0.buffers.bn.running_var"
    # a wrong momentum is the port's, and still fails, first at the running mean
    bug = _run_json("cnn", tmp_path, "--bug", "bn-momentum")
    assert not bug["passed"] and bug["first_divergence"] == "step0.buffers.bn.running_mean"
    assert bug["first_divergence_side"] == "b"


def test_with_the_float64_reference_the_attention_port_passes(programs, tmp_path):
    doc = _run_json("attention", tmp_path)
    assert doc["passed"], [r["name"] for r in doc["tensors"] if not r["passed"]]
    assert [z["param"] for z in doc["zero_gradients"]] == ["attn.in_proj_bias"]
    bug = _run_json("attention", tmp_path, "--bug", "dropout")
    assert not bug["passed"] and bug["first_divergence"] == "step0.activations.attn"
    (d010,) = [d for d in bug["diagnosis"] if d["rule"] == "D010"]
    assert "`.with_dropout(0.0)`" in d010["fix"]
    # the warmup schedule left out: both sides say what each step's rate was, and they differ
    flat = _run_json("attention", tmp_path, "--bug", "no-warmup")
    assert not flat["passed"] and flat["first_divergence"] == "step0.params_after.emb.weight"
    (d005,) = [d for d in flat["diagnosis"] if d["rule"] == "D005"]
    assert d005["evidence"] == "lr_per_step: pytorch [0.005, 0.01, 0.01, 0.01], burn none"


def test_with_the_float64_reference_the_transformer_passes_at_the_default_tolerance(programs, tmp_path):
    doc = _run_json("transformer", tmp_path, "--tol", "1e-6")
    assert doc["passed"]
    assert [d["variant"] for d in doc["framework_differences"]] == ["burn-adam"]
    bug = _run_json("transformer", tmp_path, "--bug", "gelu-tanh")
    assert not bug["passed"] and bug["first_divergence"] == "step0.activations.mlp.act"
    assert bug["first_divergence_layer"] == "GELU"

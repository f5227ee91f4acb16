"""The float64 arbiter: recording the reference, the burn-adam variant, and the noise-or-bug verdict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from burnside.examples.a1 import a1_data, a1_model, a1_optimizer, record_reference, record_torch
from burnside.compare import open_reference
from burnside.pipeline import compare_with_evidence
from burnside.compare.referee import verdict
from burnside.compare.rounding import FLOOR_HALF_ULPS, NOISE_FACTOR
from burnside.recording.reference import variant_class
from burnside.recording.reference import record_reference as record_double
from burnside.torch import record
from burnside.trace import open_trace, write_trace

from .conftest import run_cli

BurnAdam = variant_class("adam")


def test_the_reference_is_a_float64_copy_and_leaves_the_model_alone(tmp_path):
    model = a1_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    x, y = a1_data()
    path = record_double(model, a1_optimizer(model, "adam"), {"x": x, "y": y}, tmp_path / "r.safetensors", steps=2)
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32 and torch.equal(p, before[name])
    reference = open_reference(path)
    assert reference.trace.info("step1.params_after.fc1.weight").dtype == "F64"
    assert reference.trace.info("step1.optim.exp_avg_sq.fc1.weight").dtype == "F64"  # state not cast to f32
    assert set(reference.variants) == {"burn-adam"}
    assert reference.variants["burn-adam"].metadata["variant"] == "burn-adam"
    assert not open_reference(record_reference(tmp_path / "sgd.safetensors", steps=2, optim="sgd")).variants


def _four_adam_steps(kind: str, betas: tuple[float, float]) -> torch.Tensor:
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 3).double()
    if kind == "torch":
        opt = torch.optim.Adam(layer.parameters(), lr=0.01, betas=betas, eps=2.0**-10)
    else:
        opt = BurnAdam(layer.parameters(), lr=0.01, betas=betas, eps=2.0**-10, weight_decay=0.0, decoupled=False)
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).reshape(4, 5)
    for _ in range(4):
        opt.zero_grad()
        layer(x).square().sum().backward()
        opt.step()
    return layer.weight.detach().clone()


def test_burn_adam_is_adam_but_for_its_f32_constants():
    # betas exact in f32: only the f32 rounding of sqrt(1 - beta_2^t) is left (measured 1.9e-11)
    exact = (_four_adam_steps("torch", (0.5, 0.75)) - _four_adam_steps("burn", (0.5, 0.75))).abs().max()
    assert exact < 1e-10
    # PyTorch's betas: 0.999f32 and the cancelling 1 - beta_2^t move the update (measured 1.3e-7)
    usual = (_four_adam_steps("torch", (0.9, 0.999)) - _four_adam_steps("burn", (0.9, 0.999))).abs().max()
    assert usual > 1000 * exact


def test_burn_adam_rounds_beta_2_as_burn_does(tmp_path):
    reference = open_reference(record_reference(tmp_path / "r.safetensors", steps=1, optim="adam"))
    plain = np.asarray(reference.trace.array("step0.optim.exp_avg_sq.fc1.bias"))
    burn = np.asarray(reference.variants["burn-adam"].array("step0.optim.exp_avg_sq.fc1.bias"))
    ratio = burn[plain != 0] / plain[plain != 0]
    expected = float(np.float32(1) - np.float32(0.999)) / 1e-3  # 1 - 0.999f32, against PyTorch's 1e-3
    assert np.allclose(ratio, expected, rtol=1e-12, atol=0)
    assert expected - 1 == pytest.approx(-1.2875e-5, rel=1e-3)


@pytest.mark.parametrize(("dist_a", "dist_b", "scale", "expected"), [
    (1e-8, 1e-8, 1e-3, "noise"),
    (1e-8, NOISE_FACTOR * 1e-8, 1e-3, "noise"),
    (1e-8, 2 * NOISE_FACTOR * 1e-8, 1e-3, "b"),
    (2 * NOISE_FACTOR * 1e-8, 1e-8, 1e-3, "a"),
    (0.0, FLOOR_HALF_ULPS * 2.0**-24, 1.0, "noise"),  # one side exact, the other within the floor
    (0.0, 2 * FLOOR_HALF_ULPS * 2.0**-24, 1.0, "b"),
    (1e-8, float("nan"), 1.0, "b"),
])
def test_the_verdict_rule(dist_a, dist_b, scale, expected):
    assert verdict(dist_a, dist_b, scale) == expected


def test_a_side_rounded_from_the_reference_is_noise_and_a_wrong_lr_is_the_sides_own(tmp_path):
    a = record_torch(tmp_path / "a.safetensors", steps=3, optim="sgd")
    r = record_reference(tmp_path / "r.safetensors", steps=3, optim="sgd")
    ref = open_trace(r)
    rounded = {n: (np.asarray(ref.array(n)).astype(np.float32) if ref.info(n).dtype == "F64"
                   else np.asarray(ref.array(n))) for n in ref.names}
    b = write_trace(tmp_path / "b.safetensors", rounded, open_trace(a).metadata | {"framework": "burn"})
    comparison = compare_with_evidence(open_trace(a), open_trace(b), reference=open_reference(r))
    assert comparison.passed and all(row.ref.noise for row in comparison.rows if row.ref is not None)

    model = a1_model()
    x, y = a1_data()
    from burnside.torch import record

    wrong = record(model, torch.optim.SGD(model.parameters(), lr=0.05), {"x": x, "y": y}, tmp_path / "w.safetensors",
                   steps=3)
    proc = run_cli("compare", str(a), str(wrong), "--reference", str(r))
    assert proc.returncode == 1
    assert "real difference: B (pytorch) is" in proc.stdout
    assert "from step0.params_after.fc1.weight on" in proc.stdout
    assert "|A-R|=" in proc.stdout and "|B-R|=" in proc.stdout
    import json

    doc = json.loads(run_cli("compare", str(a), str(wrong), "--reference", str(r), "--json").stdout)
    assert doc["first_divergence"] == "step0.params_after.fc1.weight" and doc["first_divergence_side"] == "b"
    row = next(t for t in doc["tensors"] if t["name"] == "step0.params_after.fc1.weight")
    assert row["reference"]["verdict"] == "b" and row["reference"]["dist_b"] > 100 * row["reference"]["dist_a"]


def test_a_reference_from_another_start_is_refused_not_trusted(tmp_path):
    """A reference of other weights (a model already trained, another seed) or other batches would judge
    both sides by a run neither made, and pass a real bug as noise: compare refuses it."""
    a = record_torch(tmp_path / "a.safetensors", steps=2, optim="sgd")
    model = a1_model()
    wrong = record(model, torch.optim.SGD(model.parameters(), lr=0.05), _batch(), tmp_path / "w.safetensors", steps=2)
    model = a1_model()
    with torch.no_grad():
        model.fc1.weight.add_(1e-3)  # as if recorded after a training step
    trained = record_double(model, torch.optim.SGD(model.parameters(), lr=0.1), _batch(),
                            tmp_path / "trained.safetensors", steps=2)
    x, y = a1_data()
    model = a1_model()
    other_batch = record_double(model, a1_optimizer(model, "sgd"), {"x": x.flip(0), "y": y},
                                tmp_path / "batch.safetensors", steps=2)
    for reference, differs in ((trained, "step0.params_before.fc1.weight"), (other_batch, "step0.inputs.x")):
        proc = run_cli("compare", str(a), str(wrong), "--reference", str(reference))
        assert proc.returncode == 2, proc.stdout
        assert f"does not start where {a} does: {differs} differs" in proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert run_cli("compare", str(a), str(wrong), "--reference",
                   str(record_reference(tmp_path / "r.safetensors", steps=2, optim="sgd"))).returncode == 1


def _batch() -> dict:
    x, y = a1_data()
    return {"x": x, "y": y}


def test_a_trace_that_is_not_a_reference_is_one_line_and_exit_2(tmp_path):
    a = record_torch(tmp_path / "a.safetensors", steps=1)
    proc = run_cli("compare", str(a), str(a), "--reference", str(a))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "is not a float64 reference trace" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_reference_given_as_a_side_to_compare_is_one_line_and_exit_2(tmp_path):
    a = record_torch(tmp_path / "a.safetensors", steps=1)
    r = record_reference(tmp_path / "a.reference.safetensors", steps=1, optim="sgd")
    for side, args in (("A", (r, a)), ("B", (a, r))):
        proc = run_cli("compare", *map(str, args))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr == (f"error: {r} is a float64 reference (burnside.reference.record_reference), not a "
                               f"side to compare ({side}): pass it as --reference and give A and B the two sides' "
                               "traces\n")
    assert run_cli("compare", str(a), str(a), "--reference", str(r)).returncode == 0


def test_a_reference_without_its_variant_file_is_one_line_and_exit_2(tmp_path):
    r = record_reference(tmp_path / "r.safetensors", steps=1, optim="adam")
    (tmp_path / "r.burn-adam.safetensors").unlink()
    proc = run_cli("compare", str(r), str(r), "--reference", str(r))
    assert proc.returncode == 2 and "keep the reference's files together" in proc.stderr


def test_run_refuses_reference_and_no_reference_together(tmp_path):
    proc = run_cli("run", "a1", "--reference", str(tmp_path / "r.safetensors"), "--no-reference")
    assert proc.returncode == 2 and "contradict" in proc.stderr


class _BatchNormNet(torch.nn.Module):
    """Linear -> BatchNorm (training) -> ReLU -> Linear: fc1's bias has an exactly-zero gradient."""

    def __init__(self, reversed_batch: bool) -> None:
        super().__init__()
        self.reversed_batch = reversed_batch
        self.fc1, self.bn, self.fc2 = torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the batch in another order: the same function, other rounding in BatchNorm's reductions
        order = torch.arange(x.shape[0] - 1, -1, -1) if self.reversed_batch else torch.arange(x.shape[0])
        return self.fc2(torch.relu(self.bn(self.fc1(x[order]))))[torch.argsort(order)]


def test_zero_gradients_amplified_by_adam_are_named_not_blamed(tmp_path):
    from burnside.torch import record

    x, y = torch.linspace(-1, 1, 32).reshape(8, 4), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    paths = {}
    for side, reversed_batch in (("a", False), ("b", True), ("r", False)):
        torch.manual_seed(0)
        model = _BatchNormNet(reversed_batch)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        recorder = record_double if side == "r" else record
        paths[side] = recorder(model, opt, {"x": x, "y": y}, tmp_path / f"{side}.safetensors", steps=4)
    comparison = compare_with_evidence(open_trace(paths["a"]), open_trace(paths["b"]),
                                       reference=open_reference(paths["r"]))
    zero = {z.param: z for z in comparison.zero_gradients}
    assert zero["fc1.bias"].count == 6 and zero["fc1.bias"].first_step == 0
    rows = {r.name: r for r in comparison.rows}
    bias = rows["step3.params_after.fc1.bias"]
    # Adam turned ~1e-8 of noise into lr-sized steps, differently per side: at least half the lr (0.01) apart by
    # step 3, thousands of times the tolerance (how far exactly depends on the CPU's rounding: 0.009 to over 0.01)
    assert bias.stats.max_abs > 0.005
    assert bias.ref.noise and bias.passed
    assert not any(r.name.endswith("fc1.bias") for r in comparison.failed_rows)
    proc = run_cli("compare", str(paths["a"]), str(paths["b"]), "--reference", str(paths["r"]))
    line = next(line for line in proc.stdout.splitlines() if line.startswith("zero gradient up to rounding"))
    assert "fc1.bias, 6 of 6 elements from step 0" in line
    assert "Adam divides that noise" in proc.stdout


class _Mlp(torch.nn.Module):
    def __init__(self, act) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = torch.nn.Linear(4, 16), act, torch.nn.Linear(16, 3)
        with torch.no_grad():
            self.fc1.bias[:4] = -3.0  # four units below zero on every sample: ReLU's gradient there is exactly 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def test_a_real_gradient_where_the_reference_has_none_is_not_called_rounding_noise(tmp_path):
    """ReLU's gradient is exactly zero where its input is negative; a port with GELU there has a real, small one.
    That is the port computing something else, not rounding noise to leave out of the verdict."""
    def run(act, path, reference=False):
        torch.manual_seed(0)
        model = _Mlp(act)
        torch.manual_seed(1)
        batch = {"x": torch.randn(32, 4), "y": torch.randint(0, 3, (32,))}
        return (record_double if reference else record)(model, torch.optim.Adam(model.parameters(), lr=0.01), batch,
                                                        path, steps=3)

    a = run(torch.nn.ReLU(), tmp_path / "a.safetensors")
    r = run(torch.nn.ReLU(), tmp_path / "r.safetensors", reference=True)
    g = run(torch.nn.GELU(), tmp_path / "g.safetensors")
    comparison = compare_with_evidence(open_trace(a), open_trace(g), reference=open_reference(r))
    assert not comparison.passed
    assert not comparison.zero_gradients, comparison.zero_gradients

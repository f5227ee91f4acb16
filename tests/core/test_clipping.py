"""Gradient clipping by the global norm (PyTorch's `clip_grad_norm_`): recorded, re-run in float64,
declared in the metadata, replayed by the optimizer forensics, and named when a side clips otherwise."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from burnside.recording.optim_state import optimizer_config
from burnside.examples.a1 import a1_data, a1_model
from burnside.compare import open_reference
from burnside.pipeline import compare_with_evidence
from burnside.forensics import measure_optimizer
from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.recording.reference import has_burn_adam_variant, record_reference
from burnside.torch import record
from burnside.trace import open_trace, write_trace

from .conftest import run_cli

STEPS = 3


def _batch() -> dict:
    x, y = a1_data()
    return {"x": x, "y": y}


def _norm0() -> float:
    """A1's gradient norm at step 0, all parameters together."""
    model = a1_model()
    torch.nn.functional.cross_entropy(model(_batch()["x"]), _batch()["y"]).backward()
    return float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]))


def _record(path, *, clip: float | None, optim: str = "adam", reference: bool = False, lr: float = 0.01):
    model = a1_model()
    opt = torch.optim.Adam(model.parameters(), lr=lr) if optim == "adam" else torch.optim.SGD(model.parameters(), lr=lr)
    return (record_reference if reference else record)(model, opt, _batch(), path, steps=STEPS, clip_grad_norm=clip)


def test_the_recorder_keeps_the_unclipped_gradients_and_steps_with_the_clipped_ones(tmp_path):
    clip = _norm0() / 4
    trace = open_trace(_record(tmp_path / "t.safetensors", clip=clip, optim="sgd", lr=0.1))
    assert trace.optimizer["clip_grad_norm"] == pytest.approx(clip)
    grads = {p: np.asarray(trace.array(f"step0.grads.{p}"), dtype=np.float64) for p in trace.metadata["params"]}
    total = math.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
    assert total == pytest.approx(4 * clip, rel=1e-6), "what backward gave, not the clipped gradients"
    coef = clip / (total + 1e-6)
    for p, g in grads.items():
        before = np.asarray(trace.array(f"step0.params_before.{p}"), dtype=np.float64)
        after = np.asarray(trace.array(f"step0.params_after.{p}"), dtype=np.float64)
        np.testing.assert_allclose(after, before - 0.1 * coef * g, atol=1e-7)
    forensics = measure_optimizer(trace)
    assert forensics.mismatch_step is None and "clip_grad_norm" not in forensics.measured
    with pytest.raises(BurnsideError, match="clip_grad_norm must be a positive number"):
        _record(tmp_path / "bad.safetensors", clip=0.0)


def test_the_reference_clips_as_the_trace_and_one_that_does_not_is_refused(tmp_path):
    clip = _norm0() / 4
    a = _record(tmp_path / "a.safetensors", clip=clip)
    r = _record(tmp_path / "r.safetensors", clip=clip, reference=True)
    reference = open_reference(r)
    assert reference.trace.optimizer["clip_grad_norm"] == pytest.approx(clip)
    assert reference.variants["burn-adam"].optimizer["clip_grad_norm"] == pytest.approx(clip)
    comparison = compare_with_evidence(open_trace(a), open_trace(a), reference=reference)
    assert comparison.passed
    assert not [d for d in diagnose(comparison) if d.rule in ("D005", "D009")]
    # a reference of another loop judges both sides by a run neither made: refused, one line, exit 2
    unclipped = _record(tmp_path / "r0.safetensors", clip=None, reference=True)
    other_lr = _record(tmp_path / "r1.safetensors", clip=clip, reference=True, lr=0.02)
    for ref, said in ((unclipped, f"its optimizer has clip_grad_norm none, the trace's {clip!r}"),
                      (other_lr, "its optimizer has lr 0.02, the trace's 0.01")):
        proc = run_cli("compare", str(a), str(a), "--reference", str(ref))
        assert proc.returncode == 2, proc.stdout
        assert said in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_what_a_float64_rerun_cannot_carry_is_refused_and_a_plain_subclass_is_its_base(tmp_path):
    def clip_hook(optimizer, args, kwargs):
        torch.nn.utils.clip_grad_norm_(optimizer.param_groups[0]["params"], 0.1)

    model = a1_model()
    hooked = torch.optim.Adam(model.parameters(), lr=0.01)
    hooked.register_step_pre_hook(clip_hook)
    with pytest.raises(BurnsideError, match=r"1 step hook\(s\), which a float64 re-run cannot carry over"):
        record_reference(model, hooked, _batch(), tmp_path / "h.safetensors", steps=1)

    class ClippingAdam(torch.optim.Adam):
        def step(self, closure=None):
            torch.nn.utils.clip_grad_norm_(self.param_groups[0]["params"], 0.1)
            return super().step(closure)

    with pytest.raises(BurnsideError, match="ClippingAdam overrides Adam.step"):
        record_reference(model, ClippingAdam(model.parameters(), lr=0.01), _batch(), tmp_path / "s.safetensors",
                         steps=1)

    class NamedAdam(torch.optim.Adam):
        pass

    named = NamedAdam(model.parameters(), lr=0.01)
    assert optimizer_config(named)["name"] == "adam" and has_burn_adam_variant(named)
    assert not (tmp_path / "h.safetensors").exists() and not (tmp_path / "s.safetensors").exists()


def _relabel(path, out, **optimizer) -> object:
    """The trace at ``path`` with its optimizer metadata changed (None removes a key)."""
    trace = open_trace(path)
    config = {k: v for k, v in {**trace.optimizer, **optimizer}.items() if v is not None}
    return open_trace(write_trace(out, {n: np.asarray(trace.array(n)) for n in trace.names},
                                  {**trace.metadata, "optimizer": config, "framework": "burn"}))


def test_undeclared_clipping_and_declared_clipping_not_done_are_measured_from_the_moments(tmp_path):
    clip = _norm0() / 4
    clipped = _record(tmp_path / "c.safetensors", clip=clip)
    unclipped = _record(tmp_path / "u.safetensors", clip=None)
    # a loop that clips without saying so
    silent = measure_optimizer(_relabel(clipped, tmp_path / "silent.safetensors", clip_grad_norm=None))
    assert silent.mismatch_step == 0
    assert silent.measured["clip_grad_norm"] == pytest.approx(clip, rel=1e-3)
    assert "beta_1" not in silent.measured and "beta_2" not in silent.measured, "the scale, not the betas"
    # a loop that says it clips and does not
    claims = _relabel(unclipped, tmp_path / "claims.safetensors", clip_grad_norm=clip)
    forensics = measure_optimizer(claims)
    assert forensics.mismatch_step == 0 and math.isinf(forensics.measured["clip_grad_norm"])
    comparison = compare_with_evidence(open_trace(clipped), claims)
    (d009,) = [d for d in diagnose(comparison) if d.rule == "D009"]
    assert f"the trace says clip_grad_norm {clip:g}; its updates show no clipping" in d009.evidence
    assert "ClipGradNorm::new" in d009.fix
    assert not [d for d in diagnose(comparison) if d.rule == "D005"], "both declare the same clipping"


def test_a_learning_rate_schedule_is_recorded_replayed_and_compared(tmp_path):
    warmup = lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 3))  # noqa: E731

    def run(path, schedule, reference=False):
        model = a1_model()
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        return (record_reference if reference else record)(model, opt, _batch(), path, steps=4, lr_schedule=schedule)

    a = open_trace(run(tmp_path / "a.safetensors", warmup))
    assert a.optimizer["lr"] == 0.01, "the optimizer's own lr, which the schedule scales"
    assert a.optimizer["lr_per_step"] == pytest.approx([0.01 / 3, 0.02 / 3, 0.01, 0.01])
    forensics = measure_optimizer(a)
    assert forensics.mismatch_step is None, forensics
    r = run(tmp_path / "r.safetensors", warmup, reference=True)
    assert compare_with_evidence(a, a, reference=open_reference(r)).passed
    # a port without the schedule: the declarations differ, at the first step
    flat = open_trace(run(tmp_path / "flat.safetensors", None))
    comparison = compare_with_evidence(a, _relabel(tmp_path / "flat.safetensors", tmp_path / "b.safetensors"))
    (d005,) = [d for d in diagnose(comparison) if d.rule == "D005"]
    assert d005.evidence == "lr_per_step: pytorch [0.00333333, 0.00666667, 0.01, 0.01], burn none"
    assert "recorder.lr(step, lr)" in d005.fix
    assert "lr_per_step" not in flat.optimizer


def test_a_reference_of_another_loss_is_refused_by_its_first_value(tmp_path):
    """Label smoothing (or class weights, a reduction) is not in the metadata: the first loss tells."""
    smoothed = lambda logits, y: torch.nn.functional.cross_entropy(logits, y, label_smoothing=0.1)  # noqa: E731
    smoothed.__name__ = "cross_entropy"

    def run(path, loss_fn, reference=False):
        model = a1_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        return (record_reference if reference else record)(model, opt, _batch(), path, steps=2, loss_fn=loss_fn)

    a = run(tmp_path / "a.safetensors", smoothed)
    plain = run(tmp_path / "r.safetensors", torch.nn.functional.cross_entropy, reference=True)
    proc = run_cli("compare", str(a), str(a), "--reference", str(plain))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "its first loss is" in proc.stderr and "label smoothing" in proc.stderr
    same = run(tmp_path / "s.safetensors", smoothed, reference=True)
    assert run_cli("compare", str(a), str(a), "--reference", str(same)).returncode == 0


def test_an_optimizer_of_another_models_parameters_is_one_clear_error(tmp_path):
    other = a1_model()
    with pytest.raises(BurnsideError, match=r"holds 4 parameter\(s\) that are not the model's"):
        record_reference(a1_model(), torch.optim.SGD(other.parameters(), lr=0.1), _batch(), tmp_path / "r.safetensors",
                         steps=1)


def test_a_scheduler_made_on_the_optimizer_is_refused_for_its_factory(tmp_path):
    model = a1_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    before = [p.detach().clone() for p in model.parameters()]
    made = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0)
    with pytest.raises(BurnsideError, match=r"^lr_schedule takes a factory of the scheduler, e\.g\. `lr_schedule="
                                            r"lambda opt: LambdaLR\(opt, \.\.\.\)`, not a LambdaLR made on"):
        record(model, opt, _batch(), tmp_path / "t.safetensors", steps=2, lr_schedule=made,
               reference=tmp_path / "r.safetensors")
    with pytest.raises(BurnsideError, match=r"^lr_schedule\(optimizer\) gave a float, not a scheduler"):
        record(model, opt, _batch(), tmp_path / "t.safetensors", steps=2, lr_schedule=lambda opt: 0.5)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "nothing trained"
    assert not list(tmp_path.iterdir()), "nothing written"


def test_parameter_groups_are_recorded_replayed_per_group_and_compared(tmp_path):
    """The usual transformer setup: no weight decay on biases. The PyTorch side's own updates replay with each
    group's settings (no D009 against it), and a port with one setting for all is named by the group."""

    def run(path, grouped):
        model = a1_model()
        biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
        weights = [p for n, p in model.named_parameters() if not n.endswith("bias")]
        groups = [{"params": weights}, {"params": biases, "weight_decay": 0.0}] if grouped else model.parameters()
        return open_trace(record(model, torch.optim.AdamW(groups, lr=0.01, weight_decay=0.1), _batch(), path,
                                 steps=3))

    a = run(tmp_path / "a.safetensors", grouped=True)
    assert a.optimizer["groups"] == [{"params": ["fc1.weight", "fc2.weight"]},
                                     {"params": ["fc1.bias", "fc2.bias"], "weight_decay": 0.0}]
    assert measure_optimizer(a).mismatch_step is None, "each parameter replayed with its group's decay"
    one = run(tmp_path / "one.safetensors", grouped=False)
    comparison = compare_with_evidence(a, _relabel(tmp_path / "one.safetensors", tmp_path / "b.safetensors"))
    (d005,) = [d for d in diagnose(comparison) if d.rule == "D005"]
    assert "weight_decay of 2 parameter(s) by their group (fc1.bias, fc2.bias): pytorch 0.0, burn 0.1" in d005.evidence
    assert "GradientsParams::from_params" in d005.fix and "with_group" in d005.fix
    assert "groups" not in one.optimizer

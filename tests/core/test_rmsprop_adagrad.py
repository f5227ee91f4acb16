"""RMSprop and Adagrad on the PyTorch side: described fully in the metadata (each parameter group's settings too),
their state recorded under PyTorch's slot names, re-run in float64 by the reference, their settings checked
by the trace reader and named by D005."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from burnside.examples.a1 import a1_data, a1_model
from burnside.compare import compare_traces
from burnside.diagnose import diagnose
from burnside.errors import BurnsideError, TraceError
from burnside.pipeline import compare_with_evidence
from burnside.recording.reference import record_reference, variant_name
from burnside.torch import record
from burnside.trace import open_trace, write_trace

STEPS = 3
PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def _batch() -> dict:
    x, y = a1_data()
    return {"x": x, "y": y}


def _record(path, make, *, reference: bool = False):
    model = a1_model()
    return (record_reference if reference else record)(model, make(model.parameters()), _batch(), path, steps=STEPS)


def _slots(trace, step: int) -> set[str]:
    return {n.split(".")[2] for n in trace.names if n.startswith(f"step{step}.optim.")}


def test_rmsprop_is_described_with_every_setting_and_its_state_under_pytorchs_names(tmp_path):
    make = lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1,  # noqa: E731
                                         momentum=0.5, centered=True)
    trace = open_trace(_record(tmp_path / "r.safetensors", make))
    assert trace.optimizer == {"name": "rmsprop", "lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1,
                               "weight_decay_kind": "l2", "momentum": 0.5, "centered": True}
    # PyTorch's step counter does not enter RMSprop's update and burn keeps none: not recorded
    assert _slots(trace, STEPS - 1) == {"square_avg", "grad_avg", "momentum_buffer"}
    plain = open_trace(_record(tmp_path / "p.safetensors", lambda p: torch.optim.RMSprop(p, lr=0.01)))
    assert _slots(plain, 0) == {"square_avg"}
    g = np.asarray(plain.array("step0.grads.fc2.bias"), dtype=np.float64)
    assert np.allclose(plain.array("step0.optim.square_avg.fc2.bias"), 0.01 * g * g, rtol=1e-6)


def test_adagrad_is_described_and_its_sum_and_step_recorded(tmp_path):
    make = lambda p: torch.optim.Adagrad(p, lr=0.01, lr_decay=0.1, weight_decay=0.01,  # noqa: E731
                                         initial_accumulator_value=0.5, eps=1e-8)
    trace = open_trace(_record(tmp_path / "a.safetensors", make))
    assert trace.optimizer == {"name": "adagrad", "lr": 0.01, "lr_decay": 0.1, "weight_decay": 0.01,
                               "weight_decay_kind": "l2", "initial_accumulator_value": 0.5, "eps": 1e-8}
    assert _slots(trace, 0) == {"sum", "step"}
    assert [float(trace.array(f"step{k}.optim.step.fc1.weight")) for k in range(STEPS)] == [1.0, 2.0, 3.0]


def test_an_adagrad_parameter_no_step_updates_has_no_state_as_on_burn(tmp_path):
    model = a1_model()
    model.fc2.bias.requires_grad_(False)  # Adagrad's constructor still makes its state
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)
    trace = open_trace(record(model, opt, _batch(), tmp_path / "f.safetensors", steps=1))
    assert not any(n.endswith(".fc2.bias") for n in trace.names if ".optim." in n)
    assert "step0.optim.sum.fc2.weight" in trace.names


def test_each_group_of_either_optimizer_is_described(tmp_path):
    model = a1_model()
    opt = torch.optim.RMSprop([{"params": model.fc1.parameters()},
                               {"params": model.fc2.parameters(), "momentum": 0.9, "alpha": 0.95}], lr=0.01)
    trace = open_trace(record(model, opt, _batch(), tmp_path / "g.safetensors", steps=1))
    assert trace.optimizer["momentum"] == 0.0 and trace.optimizer["param_groups"] == 2
    assert trace.optimizer["groups"][1] == {"params": ["fc2.weight", "fc2.bias"], "momentum": 0.9, "alpha": 0.95}
    assert "step0.optim.momentum_buffer.fc2.weight" in trace.names
    assert "step0.optim.momentum_buffer.fc1.weight" not in trace.names


@pytest.mark.parametrize(("make", "variant"), [
    (lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True), "burn-rmsprop"),
    (lambda p: torch.optim.Adagrad(p, lr=0.01, lr_decay=0.1, initial_accumulator_value=0.1), None),
], ids=["rmsprop", "adagrad"])
def test_the_reference_reruns_them_in_float64(tmp_path, make, variant):
    trace = open_trace(_record(tmp_path / "t.safetensors", make))
    reference = open_trace(_record(tmp_path / "r.safetensors", make, reference=True))
    assert reference.metadata["reference"] == "float64"
    # burn's RMSprop forms `1 - alpha` in f32: a variant; its Adagrad computes PyTorch's update, none
    assert variant_name(a1_model(), make(a1_model().parameters())) == variant
    assert (f"variant.{variant}" in reference.metadata) == (variant is not None)
    assert reference.optimizer == trace.optimizer
    assert _slots(reference, STEPS - 1) == _slots(trace, STEPS - 1)
    variant_trace = open_trace(tmp_path / f"r.{variant}.safetensors") if variant else None
    for name in (n for n in trace.names if ".optim." in n or ".params_after." in n):
        if variant_trace is not None:  # the variant's slots are the reference's
            assert variant_trace.array(name).dtype == np.float64, name
        ref = reference.array(name)
        assert ref.dtype == (np.float32 if ".optim.step." in name else np.float64), name  # a step count is exact
        assert np.allclose(trace.array(name), ref, rtol=1e-4, atol=1e-7), name


def test_an_adagrad_that_already_stepped_is_no_fresh_optimizer_for_the_reference(tmp_path):
    model = a1_model()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)
    torch.nn.functional.cross_entropy(model(_batch()["x"]), _batch()["y"]).backward()
    opt.step()
    with pytest.raises(BurnsideError, match="from a fresh optimizer"):
        record_reference(model, opt, _batch(), tmp_path / "r.safetensors", steps=1)


@pytest.mark.parametrize(("key", "value", "says"), [
    ("centered", "yes", "must be true or false"),
    ("alpha", "0.99", "must be a finite number"),
    ("lr_decay", float("inf"), "must be a finite number"),
    ("initial_accumulator_value", None, "must be a finite number"),
])
def test_a_malformed_setting_is_one_trace_error_naming_it(tmp_path, key, value, says):
    trace = open_trace(_record(tmp_path / "t.safetensors", lambda p: torch.optim.RMSprop(p, lr=0.01)))
    meta = {k: v for k, v in trace.metadata.items() if not k.startswith("burnside.")}
    meta["optimizer"] = {**trace.optimizer, key: value}
    tensors = {n: trace.array(n) for n in trace.names}
    with pytest.raises(TraceError, match=rf"metadata optimizer\.{key} {says}"):
        write_trace(tmp_path / "bad.safetensors", tensors, json.loads(json.dumps(meta, allow_nan=True)))


@pytest.mark.parametrize(("a", "b", "says", "fix"), [
    (dict(momentum=0.0), dict(momentum=0.9), "momentum: pytorch 0.0, pytorch 0.9",
     "RmsPropConfig::new().with_momentum(0.0)"),
    (dict(eps=1e-8), dict(eps=1e-5), "eps: pytorch 1e-08, pytorch 1e-05", "RmsPropConfig::new().with_epsilon(1e-8)"),
    (dict(alpha=0.99), dict(alpha=0.9), "alpha: pytorch 0.99, pytorch 0.9", "with_alpha"),
    (dict(centered=True), dict(centered=False), "centered: pytorch True, pytorch False", "with_centered"),
])
def test_d005_names_each_differing_rmsprop_setting(tmp_path, a, b, says, fix):
    ta = open_trace(_record(tmp_path / "a.safetensors", lambda p: torch.optim.RMSprop(p, lr=0.01, **a)))
    tb = open_trace(_record(tmp_path / "b.safetensors", lambda p: torch.optim.RMSprop(p, lr=0.01, **b)))
    comparison = compare_traces(ta, tb)
    assert not comparison.passed
    d005 = next(d for d in diagnose(comparison) if d.rule == "D005")
    assert d005.evidence == says
    assert fix in d005.fix


@pytest.mark.parametrize(("a", "b", "says"), [
    (dict(eps=1e-10), dict(eps=1e-5), "eps: pytorch 1e-10, pytorch 1e-05"),
    (dict(lr_decay=0.0), dict(lr_decay=0.1), "lr_decay: pytorch 0.0, pytorch 0.1"),
    (dict(initial_accumulator_value=0.0), dict(initial_accumulator_value=0.1),
     "initial_accumulator_value: pytorch 0.0, pytorch 0.1"),
])
def test_d005_names_each_differing_adagrad_setting(tmp_path, a, b, says):
    ta = open_trace(_record(tmp_path / "a.safetensors", lambda p: torch.optim.Adagrad(p, lr=0.01, **a)))
    tb = open_trace(_record(tmp_path / "b.safetensors", lambda p: torch.optim.Adagrad(p, lr=0.01, **b)))
    comparison = compare_traces(ta, tb)
    assert not comparison.passed and "D004" not in {d.rule for d in diagnose(comparison)}
    assert next(d for d in diagnose(comparison) if d.rule == "D005").evidence == says


def test_d005_names_a_groups_differing_rmsprop_setting(tmp_path):
    def make(alpha):
        def build(params):
            params = list(params)
            return torch.optim.RMSprop([{"params": params[:2]}, {"params": params[2:], "alpha": alpha}], lr=0.01)
        return build

    comparison = compare_traces(open_trace(_record(tmp_path / "a.safetensors", make(0.99))),
                                open_trace(_record(tmp_path / "b.safetensors", make(0.9))))
    d005 = next(d for d in diagnose(comparison) if d.rule == "D005")
    assert d005.evidence == "alpha of 2 parameter(s) by their group (fc2.weight, fc2.bias): pytorch 0.99, pytorch 0.9"


def test_adagrads_start_is_its_constructors_in_every_group_as_pytorch_computes(tmp_path):
    # torch.optim.Adagrad fills each sum from the constructor's initial_accumulator_value; a group's is ignored
    def make(params):
        params = list(params)
        return torch.optim.Adagrad([{"params": params[:2]}, {"params": params[2:], "initial_accumulator_value": 5.0}],
                                   lr=0.01, initial_accumulator_value=0.1)

    trace = open_trace(_record(tmp_path / "t.safetensors", make))
    assert trace.optimizer["initial_accumulator_value"] == 0.1
    assert all("initial_accumulator_value" not in group for group in trace.optimizer["groups"])
    g = np.asarray(trace.array("step0.grads.fc2.bias"), dtype=np.float64)
    assert np.allclose(trace.array("step0.optim.sum.fc2.bias"), 0.1 + g * g, rtol=1e-6)
    reference = open_trace(_record(tmp_path / "r.safetensors", make, reference=True))
    assert np.allclose(reference.array("step0.optim.sum.fc2.bias"), 0.1 + g * g, rtol=1e-6)


def _replay(trace, override=None):
    """Every step of every parameter replayed with the declared (or ``override``) settings: (misses, fits)."""
    from burnside.optimizers.adagrad import AdagradFits, replay_adagrad
    from burnside.optimizers.rmsprop import RmsPropFits, replay_rmsprop
    from burnside.optimizers.replay import sampled

    config = {**trace.optimizer, **(override or {})}
    rmsprop = config["name"] == "rmsprop"
    fits, replay = (RmsPropFits(), replay_rmsprop) if rmsprop else (AdagradFits(), replay_adagrad)
    misses = []
    for k in range(trace.metadata["steps"]):
        for p in trace.metadata["params"]:
            before, after, grad = (sampled(trace, f"step{k}.{stage}.{p}")
                                   for stage in ("params_before", "params_after", "grads"))
            missed = replay(trace, config, k, p, before, after, grad, config["lr"], config["weight_decay"], fits)
            if missed:
                misses.append((k, missed[0]))
    return misses, fits.settings() if rmsprop else fits.settings(config["lr"])


def test_the_rmsprop_replay_reproduces_pytorch_and_measures_its_settings(tmp_path):
    make = lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, alpha=0.95)  # noqa: E731
    trace = open_trace(_record(tmp_path / "t.safetensors", make))
    misses, settings = _replay(trace)
    assert misses == []
    assert settings["alpha"] == pytest.approx(0.95, rel=1e-6) and settings["momentum"] == pytest.approx(0.9, rel=1e-5)
    # declared without momentum: the first buffer is the first quotient, so missed from the second step on
    misses, _ = _replay(trace, {"momentum": 0.0})
    assert misses[0] == (1, "params_after.fc1.weight")
    plain = open_trace(_record(tmp_path / "p.safetensors", lambda p: torch.optim.RMSprop(p, lr=0.01, eps=1e-5)))
    misses, settings = _replay(plain, {"eps": 1e-8})
    assert misses and misses[0][0] == 0
    assert settings["eps"] == pytest.approx(1e-5, rel=1e-2)


def test_the_adagrad_replay_reproduces_pytorch_and_measures_eps_and_lr_decay(tmp_path):
    make = lambda p: torch.optim.Adagrad(p, lr=0.01, lr_decay=0.1, eps=1e-5)  # noqa: E731
    trace = open_trace(_record(tmp_path / "t.safetensors", make))
    misses, settings = _replay(trace)
    assert misses == []
    assert settings["eps"] == pytest.approx(1e-5, rel=1e-2) and settings["lr_decay"] == pytest.approx(0.1, rel=1e-4)
    misses, _ = _replay(trace, {"eps": 1e-10})
    assert misses[0] == (0, "params_after.fc1.weight")
    misses, _ = _replay(trace, {"lr_decay": 0.0})
    assert misses and {k for k, _ in misses} == {1, 2}  # lr_decay first acts at the second step


def _declared_otherwise(path, changes: dict):
    """The trace at ``path`` as a port that declares ``changes`` but computed what PyTorch computed (burn's)."""
    trace = open_trace(path)
    tensors = {n: np.array(trace.array(n)) for n in trace.names}
    return write_trace(path.with_name("b.safetensors"), tensors,
                       trace.metadata | {"framework": "burn", "optimizer": trace.optimizer | changes})


@pytest.mark.parametrize(("make", "changes", "named"), [
    (lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9), {"momentum": 0.0}, "momentum"),
    (lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9), {"alpha": 0.99}, "alpha"),
    (lambda p: torch.optim.Adagrad(p, lr=0.01, lr_decay=0.1), {"lr_decay": 0.0}, "lr_decay"),
    (lambda p: torch.optim.Adagrad(p, lr=0.01, eps=1e-5), {"eps": 1e-10}, "eps"),
])
def test_d009_measures_each_setting_a_port_computes_otherwise_than_it_declares(tmp_path, make, changes, named):
    a = _record(tmp_path / "a.safetensors", make)
    b = _declared_otherwise(a, changes)
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, b))}
    assert "D009" in found, sorted(found)
    assert named in found["D009"].evidence, found["D009"].evidence
    # the faithful side: its own declaration explains its numbers
    assert "D009" not in {d.rule for d in diagnose(compare_with_evidence(a, a))}

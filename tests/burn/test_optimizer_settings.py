"""The optimizer settings D009 measures from the numbers (Nesterov, AMSGrad, weight decay of each kind, each
parameter group's), on real PyTorch and a real burn port (`optim_port/`: a two-layer MLP stepped call by call,
whose trace declares `--optim` while it steps with `--build`): a port whose trace says what PyTorch's does but
builds another optimizer is named by D009 with the setting and its fix; a faithful port is OK with no diagnosis;
a port declaring another setting is D005's. A `torch.optim.Optimizer` burnside does not know is compared as
recorded, with no optimizer diagnosis."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from burnside.burn.port import record_port
from burnside.compare import Tolerance, Tolerances
from burnside.optimizers.settings import optimizer_notes
from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace
from tests.burn.user_port_harness import Mlp, copy_crate

STEPS = 4
PORT = Path(__file__).resolve().parent / "optim_port"


@pytest.fixture(scope="module")
def port(tmp_path_factory) -> Path:
    """The port copied out of the checkout, on the installed burnside-trace and burnside's Cargo.lock."""
    return copy_crate(PORT, tmp_path_factory.mktemp("optim-port") / "optim_port")


def torch_side(tmp_path: Path, make_optimizer) -> tuple[Path, Path]:
    """The PyTorch trace and its float64 reference: the MLP from seed 0, a new batch each step."""
    torch.manual_seed(0)
    model = Mlp()
    batches = [{"x": torch.randn(4, 4), "y": torch.randint(0, 3, (4,))} for _ in range(STEPS)]
    tmp_path.mkdir(parents=True, exist_ok=True)
    trace, reference = tmp_path / "torch.safetensors", tmp_path / "reference.safetensors"
    record(model, make_optimizer(model), batches, trace, steps=STEPS, reference=reference)
    return trace, reference


def compared(port: Path, tmp_path: Path, make_optimizer, *args: str):
    """The comparison of the PyTorch side with the port run with ``args``, by the reference, and its diagnoses."""
    trace, reference = torch_side(tmp_path, make_optimizer)
    burn = record_port(trace, port, "optim_port", list(args), tmp_path / "burn")
    comparison = compare_with_evidence(trace, burn, Tolerances(Tolerance(atol=1e-6)), reference=reference)
    return comparison, diagnose(comparison)


def nesterov(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)


def heavy_ball(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def amsgrad(model):
    # beta_2 0.9: exp_avg_sq falls below its running maximum within the four steps, where AMSGrad shows
    return torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.9), amsgrad=True)


def adam_l2(model):
    return torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.1)


def gpt_groups(model):
    # a GPT's AdamW: decay on the weights, none on the biases (and norms)
    return torch.optim.AdamW([{"params": [model.fc1.weight, model.fc2.weight], "weight_decay": 0.1},
                              {"params": [model.fc1.bias, model.fc2.bias], "weight_decay": 0.0}], lr=0.01)


def biases_first(model):
    # the same groups the other way round: the decayed group is the second
    return torch.optim.AdamW([{"params": [model.fc1.bias, model.fc2.bias], "weight_decay": 0.0},
                              {"params": [model.fc1.weight, model.fc2.weight], "weight_decay": 0.1}], lr=0.01)


def sgd_groups(model):
    return torch.optim.SGD([{"params": [model.fc1.weight, model.fc2.weight], "weight_decay": 0.01},
                            {"params": [model.fc1.bias, model.fc2.bias], "weight_decay": 0.0}], lr=0.1, momentum=0.9)


FAITHFUL = [
    ("nesterov", nesterov, ["--optim", "sgd:momentum=0.9,nesterov=true"]),
    ("amsgrad", amsgrad, ["--optim", "adam:beta_2=0.9,amsgrad=true"]),
    ("adam-l2", adam_l2, ["--optim", "adam:weight_decay=0.1"]),
    ("gpt-groups", gpt_groups, ["--optim", "adamw:weight_decay=0.1",
                                "--group", "adamw:weight_decay=0@fc1.bias+fc2.bias"]),
    ("sgd-groups", sgd_groups, ["--optim", "sgd:momentum=0.9,weight_decay=0.01",
                                "--group", "sgd:momentum=0.9@fc1.bias+fc2.bias"]),
]


@pytest.mark.parametrize(("case", "make_optimizer", "args"), FAITHFUL, ids=[c[0] for c in FAITHFUL])
def test_a_faithful_port_is_ok_and_its_settings_are_measured(port, tmp_path, case, make_optimizer, args):
    comparison, found = compared(port, tmp_path, make_optimizer, *args)
    assert comparison.passed, [(r.name, r.stats.max_abs) for r in comparison.failed_rows]
    assert not found, [(d.rule, d.evidence) for d in found]
    for forensics in (comparison.evidence.optimizer_a, comparison.evidence.optimizer_b):
        assert forensics.mismatch_step is None, forensics.to_dict()
        measured = forensics.measured
        if case == "nesterov":
            assert measured["nesterov"] == 1.0 and measured["momentum"] == pytest.approx(0.9, abs=1e-6)
        elif case == "amsgrad":
            assert measured["amsgrad"] == 1.0
        elif case == "adam-l2":
            assert measured["weight_decay_l2"] == pytest.approx(0.1, rel=1e-4)
            assert abs(measured["weight_decay_decoupled"]) < 1e-5
        elif case == "gpt-groups":
            assert measured["weight_decay_decoupled"] == pytest.approx(0.1, rel=1e-4)
            assert abs(forensics.group_measured[1]["weight_decay_decoupled"]) < 1e-5
        else:
            assert measured["weight_decay"] == pytest.approx(0.01, rel=1e-4)
            assert abs(forensics.group_measured[1]["weight_decay"]) < 1e-6


SLIPS = [
    # the trace declares nesterov=True (as PyTorch), the optimizer is built without it
    ("nesterov-dropped", nesterov, ["--optim", "sgd:momentum=0.9,nesterov=true", "--build", "sgd:momentum=0.9"],
     ["the trace says nesterov on; its updates show nesterov off", "with_nesterov(true)"]),
    ("nesterov-added", heavy_ball, ["--optim", "sgd:momentum=0.9", "--build", "sgd:momentum=0.9,nesterov=true"],
     ["the trace says nesterov off; its updates show nesterov on", "with_nesterov(false)"]),
    ("amsgrad-dropped", amsgrad, ["--optim", "adam:beta_2=0.9,amsgrad=true", "--build", "adam:beta_2=0.9"],
     ["the trace says amsgrad on; its updates show amsgrad off", "with_amsgrad(true)"]),
    # torch.optim.Adam's L2 decay ported as burn's AdamW (decoupled)
    ("l2-decoupled", adam_l2, ["--optim", "adam:weight_decay=0.1", "--build", "adamw:weight_decay=0.1"],
     ["the trace says weight_decay 0.1 (L2, added to the gradient); its updates show weight decay 0.1",
      "(decoupled, applied to the parameter)",
      "AdamConfig::new().with_weight_decay(Some(WeightDecayConfig::new(0.1)))"]),
    # the decay group built from AdamWConfig::new()'s default decay, 1e-4
    ("gpt-default-decay", gpt_groups, ["--optim", "adamw:weight_decay=0.1", "--build", "adamw:weight_decay=0.0001",
                                       "--group", "adamw:weight_decay=0@fc1.bias+fc2.bias"],
     ["the trace says weight_decay 0.1 (decoupled, applied to the parameter); its updates show weight decay 0.0001",
      "with_weight_decay(0.1)"]),
    ("second-group-decay", biases_first, ["--optim", "adamw:weight_decay=0", "--group",
                                          "adamw:weight_decay=0.1@fc1.weight+fc2.weight",
                                          "--build-group", "adamw:weight_decay=0.0001"],
     ["for parameter group 1 (fc1.weight, fc2.weight); its updates show weight decay 0.0001",
      "TraceRecorder::with_group"]),
    ("sgd-group-decay", sgd_groups, ["--optim", "sgd:momentum=0.9,weight_decay=0.01", "--group",
                                     "sgd:momentum=0.9@fc1.bias+fc2.bias", "--build-group",
                                     "sgd:momentum=0.9,weight_decay=0.01"],
     ["the trace says weight_decay 0 for parameter group 1 (fc1.bias, fc2.bias); its updates show 0.01"]),
]


@pytest.mark.parametrize(("case", "make_optimizer", "args", "words"), SLIPS, ids=[c[0] for c in SLIPS])
def test_a_port_building_another_optimizer_than_it_declares_is_named_by_d009(port, tmp_path, case, make_optimizer,
                                                                            args, words):
    comparison, found = compared(port, tmp_path, make_optimizer, *args)
    assert not comparison.passed
    assert not comparison.optimizer_differences  # the metadata agrees: only the numbers tell
    assert [d.rule for d in found] == ["D009"], [(d.rule, d.evidence) for d in found]
    text = found[0].evidence + " | " + found[0].fix
    assert "burn" in found[0].evidence.split(":")[0]
    for word in words:
        assert word in text, (word, text)


def rmsprop(model):
    return torch.optim.RMSprop(model.parameters(), lr=0.01)


def rmsprop_alpha(model):
    return torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9)


def rmsprop_centered(model):
    return torch.optim.RMSprop(model.parameters(), lr=0.01, centered=True)


def adamw_gpt(model):
    return torch.optim.AdamW(model.parameters(), lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)


#: burn optimizers built by hand from their config's `new()` (`--build burn:...`), the trace declaring PyTorch's: off
#: in several settings at once (burn's defaults wherever the port set nothing), or in a flag. The printed by-hand
#: config, given to the port's builder key by key, is the fix applied.
AS_BUILT = [
    ("rmsprop-new", rmsprop, "rmsprop", "burn:rmsprop",
     "a replay with momentum 0.9, eps 1e-05 reproduces every update, where the trace declares momentum 0, eps 1e-08",
     "RmsPropConfig::new().with_momentum(0.0).with_epsilon(1e-8)", "burn:rmsprop:momentum=0.0,eps=1e-8"),
    # alpha set in PyTorch, the port's config built with none of its settings: alpha, momentum and eps all burn's
    ("rmsprop-alpha", rmsprop_alpha, "rmsprop:alpha=0.9", "burn:rmsprop",
     "a replay with alpha 0.99, momentum 0.9, eps 1e-05 reproduces every update, where the trace declares alpha 0.9, "
     "momentum 0, eps 1e-08", "RmsPropConfig::new().with_alpha(0.9).with_momentum(0.0).with_epsilon(1e-8)",
     "burn:rmsprop:alpha=0.9,momentum=0.0,eps=1e-8"),
    # centered RMSprop ported without centering: PyTorch's grad_avg is a state slot the port has none of
    ("rmsprop-uncentered", rmsprop_centered, "rmsprop:centered=true", "burn:rmsprop:momentum=0,eps=1e-8",
     "a replay with centered off reproduces every update, where the trace declares centered on",
     "RmsPropConfig::new().with_momentum(0.0).with_epsilon(1e-8).with_centered(true)",
     "burn:rmsprop:momentum=0.0,eps=1e-8,centered=true"),
    # GPT's AdamW (betas 0.9, 0.95, decay 0.1) ported as AdamWConfig::new()
    ("adamw-new", adamw_gpt, "adamw:beta_2=0.95,weight_decay=0.1", "burn:adamw",
     "a replay with beta_2 0.999, eps 1e-05, weight_decay 0.0001 reproduces every update, where the trace declares "
     "beta_2 0.95, eps 1e-08, weight_decay 0.1", "AdamWConfig::new().with_beta_2(0.95).with_epsilon(1e-8)"
     ".with_weight_decay(0.1)", "burn:adamw:beta_2=0.95,eps=1e-8,weight_decay=0.1"),
]


@pytest.mark.parametrize(("case", "make_optimizer", "declared", "built", "evidence", "code", "fixed"), AS_BUILT,
                         ids=[c[0] for c in AS_BUILT])
def test_an_optimizer_built_by_hand_is_named_by_every_setting_it_differs_in(port, tmp_path, case, make_optimizer,
                                                                            declared, built, evidence, code, fixed):
    comparison, found = compared(port, tmp_path / "slip", make_optimizer, "--optim", declared, "--build", built)
    assert not comparison.passed
    assert [d.rule for d in found] == ["D009"], [(d.rule, d.evidence) for d in found]
    assert evidence in found[0].evidence, found[0].evidence
    assert "burn's default of" in found[0].evidence, found[0].evidence
    assert f"by hand with every declared value: `{code}`" in found[0].fix, found[0].fix
    # the printed config, built by the port setting for setting: the port is OK
    comparison, found = compared(port, tmp_path / "fixed", make_optimizer, "--optim", declared, "--build", fixed)
    assert comparison.passed, [(r.name, r.stats.max_abs) for r in comparison.failed_rows]
    assert not found, [(d.rule, d.evidence) for d in found]


def test_a_port_declaring_another_setting_is_named_by_d005(port, tmp_path):
    # the port says what it builds (no Nesterov, no AMSGrad): the metadata names it, D009 has nothing to add
    comparison, found = compared(port, tmp_path, nesterov, "--optim", "sgd:momentum=0.9")
    assert [d.rule for d in found] == ["D005"], [(d.rule, d.evidence) for d in found]
    assert "nesterov: pytorch True, burn False" in found[0].evidence and "with_nesterov" in found[0].fix
    comparison, found = compared(port, tmp_path / "ams", amsgrad, "--optim", "adam:beta_2=0.9")
    assert [d.rule for d in found] == ["D005"], [(d.rule, d.evidence) for d in found]
    assert "amsgrad: pytorch True, burn False" in found[0].evidence and "with_amsgrad" in found[0].fix


class Lion(torch.optim.Optimizer):
    """Lion (Chen et al. 2023), written as users write it: a class of its own with its own `step`."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.99), weight_decay: float = 0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(m * b1 + p.grad * (1 - b1)), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


def test_an_optimizer_burnside_does_not_know_is_compared_as_recorded_without_optimizer_diagnosis(tmp_path):
    # two PyTorch runs of a user's own optimizer, the second with another weight decay: the updates differ
    # and the comparison fails on them, but no rule judges Lion as if it were Adam or SGD
    def run(path: Path, weight_decay: float) -> Path:
        torch.manual_seed(0)
        model = Mlp()
        batches = [{"x": torch.randn(4, 4), "y": torch.randint(0, 3, (4,))} for _ in range(STEPS)]
        return record(model, Lion(model.parameters(), lr=1e-3, weight_decay=weight_decay), batches, path,
                      steps=STEPS, reference=path.with_suffix(".reference.safetensors"))

    a, b = run(tmp_path / "a.safetensors", 0.0), run(tmp_path / "b.safetensors", 1.0)
    trace = open_trace(a)
    assert trace.optimizer["name"] == "lion" and trace.optimizer["weight_decay"] == 0.0
    same = compare_with_evidence(a, a, Tolerances(Tolerance(atol=1e-6)),
                                 reference=a.with_suffix(".reference.safetensors"))
    assert same.passed and not diagnose(same)
    other = compare_with_evidence(a, b, Tolerances(Tolerance(atol=1e-6)),
                                  reference=a.with_suffix(".reference.safetensors"))
    assert not other.passed
    assert not other.optimizer_differences
    assert not [d for d in diagnose(other) if d.rule in ("D005", "D009")]
    assert optimizer_notes(trace.optimizer, open_trace(b).optimizer) == [
        "optimizer `Lion`: burnside cannot replay it; its updates are compared as recorded, no optimizer diagnosis"]

    # the verdict says so, in one line, and names no optimizer rule
    proc = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "compare", str(a), str(b),
                           "--reference", str(a.with_suffix(".reference.safetensors"))],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    notes = [line for line in proc.stdout.splitlines() if "burnside cannot replay it" in line]
    assert notes == ["optimizer `Lion`: burnside cannot replay it; its updates are compared as recorded, no optimizer "
                     "diagnosis"], proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith(("D005 ", "D009 "))], proc.stdout

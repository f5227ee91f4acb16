"""Statistics-only recording on the burn side (trace format version 3), on a real burn port (`accum_port/`, the MLP
trained by `Training` with Adam): an init file carrying `full_steps` has the port record the other steps'
tensors as statistics, each of them the statistics PyTorch's `statistics_of` computes of the same values (the hash
bit for bit, the numbers to rounding), and the hash equals PyTorch's own where the port computes PyTorch's bits."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from burnside.burn.cargo import build
from burnside.burn.port import record_port, run_binary
from burnside.torch import record
from burnside.trace import open_trace
from burnside.trace.statistics import Statistics, statistics_of
from tests.burn.user_port_harness import Mlp, copy_crate

STEPS = 4
PORT = Path(__file__).resolve().parent / "accum_port"
PORT_ARGS = ["--accumulate", "1", "--optim", "adam"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    """The PyTorch trace (every step in full), and the port's traces from its init file as it is and with
    ``full_steps=[0, 3]`` in the metadata."""
    root = tmp_path_factory.mktemp("statistics-rust")
    port = copy_crate(PORT, root / "accum_port")
    torch.manual_seed(0)
    model = Mlp()
    batches = [{"x": torch.randn(4, 4), "y": torch.randint(0, 3, (4,))} for _ in range(STEPS)]
    torch_trace = root / "torch.safetensors"
    record(model, torch.optim.Adam(model.parameters(), lr=0.01), batches, torch_trace)
    full = record_port(torch_trace, port, "accum_port", PORT_ARGS, root / "full")
    # the init file as the PyTorch side writes it for full_steps=[0, 3] (the metadata keys the port follows)
    init = root / "full" / "init.safetensors"
    with safe_open(init, "np") as f:
        metadata = dict(f.metadata())
    metadata.update(full_steps="[0, 3]", layer_statistics="false")
    asked = root / "init-full-steps.safetensors"
    save_file(load_file(init), asked, metadata=metadata)
    partial = root / "partial.burn.safetensors"
    # the same binary, run by hand on the init file with full_steps
    binary = build(port, bins=["accum_port"], reuse=True).executables["accum_port"]
    run_binary(binary, ["--init", str(asked), "-o", str(partial), *PORT_ARGS, "--steps", str(STEPS)],
               expect_file=partial)
    return {"torch": torch_trace, "full": full, "partial": partial}


def recorded_statistics(path: Path) -> dict[str, dict]:
    with safe_open(path, "np") as f:
        metadata = f.metadata()
    assert metadata["burnside.version"] == "3"
    return json.loads(metadata["statistics"])


def test_the_steps_not_full_are_statistics_and_the_rest_is_as_recorded_in_full(traces):
    statistics = recorded_statistics(traces["partial"])
    steps = {name.split(".", 1)[0] for name in statistics}
    assert steps == {"step1", "step2"}, sorted(statistics)
    kinds = {name.split(".", 1)[1].split(".")[0] for name in statistics}
    assert kinds == {"params_before", "logits", "grads", "params_after", "optim"}
    partial, full = open_trace(traces["partial"]), open_trace(traces["full"])
    assert partial.metadata["full_steps"] == [0, 3]
    # never statistics: the inputs, 0-d scalars (loss, Adam's step), the full steps
    for name in ["step1.inputs.x", "step1.inputs.y", "step1.loss", "step2.optim.step.fc1.weight",
                 "step3.params_before.fc1.weight", "step0.grads.fc2.bias", "step3.loss_after"]:
        assert name in partial.names and name not in partial.statistics, name
    for name in partial.names:
        if name not in partial.statistics:
            assert partial.array(name).tobytes() == full.array(name).tobytes(), name


def test_the_ports_statistics_are_pythons_statistics_of_the_same_values(traces):
    statistics = recorded_statistics(traces["partial"])
    full = open_trace(traces["full"])
    # per step: 4 parameters' params_before, grads, params_after, exp_avg and exp_avg_sq, and the logits
    assert len(statistics) == 2 * (5 * 4 + 1)
    for name, entry in statistics.items():
        rust = Statistics.from_json(name, entry, "burn trace")
        python = statistics_of(full.array(name), full.info(name).dtype)
        assert rust.same_bits(python), name
        assert rust.nonfinite == python.nonfinite == 0
        for field in ("mean", "norm", "max_abs"):
            a, b = getattr(rust, field), getattr(python, field)
            assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300), (name, field, a, b)


def test_the_hash_is_pytorchs_where_the_port_computes_pytorchs_bits(traces):
    statistics = recorded_statistics(traces["partial"])
    torch_trace, full = open_trace(traces["torch"]), open_trace(traces["full"])
    same = [name for name in statistics
            if name in torch_trace.names and torch_trace.array(name).tobytes() == full.array(name).tobytes()]
    assert same, "no tensor of steps 1-2 is PyTorch's bit for bit"
    for name in same:
        torch_stats = statistics_of(torch_trace.array(name), torch_trace.info(name).dtype)
        assert statistics[name]["xxh3"] == torch_stats.xxh3, name
    differs = [name for name in statistics if name in torch_trace.names and name not in same]
    for name in differs:
        assert statistics[name]["xxh3"] != statistics_of(torch_trace.array(name), torch_trace.info(name).dtype).xxh3


def _port_with_bug(root: Path, bug: str | None, full_steps, optim: str = "adam") -> tuple[Path, Path]:
    """The PyTorch trace recorded with ``full_steps``, and the port's trace from its init file, with ``bug``; both
    with Adam (lr 0.01) or ``optim="sgd"`` (lr 0.1), as the port builds them."""
    port = copy_crate(PORT, root / "accum_port")
    torch.manual_seed(0)
    model = Mlp()
    batches = [{"x": torch.randn(4, 4), "y": torch.randint(0, 3, (4,))} for _ in range(STEPS)]
    torch_trace = root / "torch.safetensors"
    opt = (torch.optim.SGD(model.parameters(), lr=0.1) if optim == "sgd"
           else torch.optim.Adam(model.parameters(), lr=0.01))
    record(model, opt, batches, torch_trace, full_steps=full_steps)
    args = ["--accumulate", "1", "--optim", optim, *(["--bug", bug] if bug else [])]
    return torch_trace, record_port(torch_trace, port, "accum_port", args, root / "burn")


def _diagnosed(root: Path, bug: str | None, full_steps, optim: str = "adam") -> tuple[bool, list]:
    from burnside.diagnose import diagnose
    from burnside.pipeline import compare_with_evidence

    comparison = compare_with_evidence(*_port_with_bug(root, bug, full_steps, optim))
    return comparison.passed, diagnose(comparison)


def test_a_faithful_port_with_statistics_steps_passes_with_no_diagnosis(tmp_path):
    passed, found = _diagnosed(tmp_path, None, [0, -1])
    assert passed and not found, [(d.rule, d.evidence) for d in found]


def test_a_bug_first_acting_in_a_statistics_step_is_located_then_named_once_recorded_in_full(tmp_path):
    """The port halves its learning rate at every step after the first, a schedule its trace does not declare: step 0
    agrees, step 1 (statistics only) parts in its update. D020 names step 1's update and `full_steps=[0, 1, 3]`, and
    no rule reads a cause off the later full step; recorded again so, D009 measures each step's learning rate from
    its updates: 0.005 at step 1 where the trace declares 0.01 (step 3 is not replayed: it starts from step 2's
    optimizer state, which is statistics only)."""
    _, found = _diagnosed(tmp_path / "statistics", "lr-decay", [0, -1])
    assert [d.rule for d in found] == ["D020"], [(d.rule, d.evidence) for d in found]
    assert "at step 1" in found[0].evidence and "the update is the first part of the step proven" in found[0].evidence
    assert "`full_steps=[0, 1, 3]`" in found[0].fix
    _, found = _diagnosed(tmp_path / "full", "lr-decay", [0, 1, 3])
    assert [d.rule for d in found] == ["D009"], [(d.rule, d.evidence) for d in found]
    assert "from step 1, its params_after" in found[0].evidence, found[0].evidence
    assert found[0].evidence.endswith("its updates show learning rate 0.005 at step 1 where the trace declares 0.01")
    assert "Training::with_lr_schedule" in found[0].fix


def test_an_sgd_ports_undeclared_decay_is_measured_step_by_step(tmp_path):
    """The same slip under SGD, every step in full: D009 measures the rate each step applied (0.1 halved at each step
    after the first), where it said "no setting of that optimizer explains it" when only Adam's rate was fitted."""
    _, found = _diagnosed(tmp_path, "lr-decay", None, "sgd")
    assert [d.rule for d in found] == ["D009"], [(d.rule, d.evidence) for d in found]
    assert found[0].evidence.endswith("its updates show learning rate 0.05 at step 1 where the trace declares 0.1, "
                                      "learning rate 0.025 at step 2 where the trace declares 0.1, learning rate "
                                      "0.0125 at step 3 where the trace declares 0.1"), found[0].evidence
    assert "Training::with_lr_schedule" in found[0].fix


@pytest.mark.parametrize("full_steps", [[0, -1], None], ids=["statistics", "full"])
def test_an_optimizer_built_inside_the_loop_is_named_by_its_step_count(tmp_path, full_steps):
    """The port builds its optimizer at every step: its step count stays 1 (a 0-d scalar, full in every step), and
    D021 names the restart whether the steps between are statistics or full (D009 said "no setting explains it")."""
    _, found = _diagnosed(tmp_path, "optim-in-loop", full_steps)
    assert [d.rule for d in found] == ["D021"], [(d.rule, d.evidence) for d in found]
    assert "step count is 1 after step 1, as after step 0" in found[0].evidence

"""Recording with ``full_steps`` and ``layer_statistics``: which tensors are statistics at which steps, what they
hold, what the init file carries, and what is refused before anything runs (real PyTorch loops)."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from torch import nn

from burnside.burn.port import init_from_trace
from burnside.errors import BurnsideError
from burnside.recording.reference import record_reference
from burnside.torch import export_init, record
from burnside.trace import Trace, open_trace, parse_name

STEPS = 3


def _model(width: int = 16):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 3))
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def _batch():
    g = torch.Generator().manual_seed(1)
    return {"x": torch.randn(4, 8, generator=g), "y": torch.tensor([0, 1, 2, 0])}


def _version(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])["__metadata__"]["burnside.version"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """The same 3-step Adam loop recorded in full and with full_steps=[0, -1]."""
    out = tmp_path_factory.mktemp("stats")
    model, opt = _model()
    full = record(model, opt, _batch(), out / "full.safetensors", steps=STEPS)
    model, opt = _model()
    stats = record(model, opt, _batch(), out / "stats.safetensors", steps=STEPS, full_steps=[0, -1])
    return open_trace(full), open_trace(stats)


def test_a_default_record_writes_no_statistics(traces):
    full, _ = traces
    assert full.statistics == {} and _version(full.path) == "2"
    assert "full_steps" not in full.metadata and "layer_statistics" not in full.metadata


def test_full_steps_0_and_last_leave_the_middle_step_as_statistics(traces):
    full, stats = traces
    assert stats.metadata["full_steps"] == [0, 2] and stats.metadata["layer_statistics"] is False
    assert _version(stats.path) == "3"
    steps = {parse_name(n).step for n in stats.statistics}
    assert steps == {1}
    # every tensor of step 1 that may be statistics is, the rest in full
    step1 = [n for n in full.names if n.startswith("step1.")]
    kept = {n for n in step1 if n in stats}
    assert {parse_name(n).stage for n in stats.statistics} >= {"params_before", "grads", "params_after", "optim",
                                                                 "logits", "activations", "layer_inputs"}
    for name in kept:
        parsed = parse_name(name)
        assert parsed.stage == "inputs" or full.info(name).shape == () or full.info(name).dtype == "I64", name
    assert set(step1) == kept | set(stats.statistics)
    # steps 0 and 2 are whole
    for name in full.names:
        if not name.startswith("step1."):
            assert name in stats, name


def test_statistics_are_those_of_the_tensors_a_full_record_holds(traces):
    """The loop is deterministic: each statistics entry is bit-identical to the full trace's tensor."""
    full, stats = traces
    for name, s in stats.statistics.items():
        assert s.same_bits(full.statistics_of(name)), name
        assert s == full.statistics_of(name)
    for name in stats.names:
        assert stats.info(name) == full.info(name)


def test_a_full_step_after_a_statistics_step_holds_its_params_before_in_full(traces):
    """step2.params_before cannot alias step1.params_after (statistics only): it is written in full, and its
    bytes are those step 1's statistics hash."""
    _, stats = traces
    for p in stats.params:
        name = f"step2.params_before.{p}"
        assert name in stats and name not in stats.aliases
        assert stats.statistics_of(name).same_bits(stats.statistics[f"step1.params_after.{p}"])
        assert stats.statistics[f"step1.params_before.{p}"].same_bits(stats.statistics_of(f"step0.params_after.{p}"))


def test_layer_statistics_makes_every_steps_layers_statistics(tmp_path):
    model, opt = _model()
    trace = open_trace(record(model, opt, _batch(), tmp_path / "t.safetensors", steps=2, layer_statistics=True))
    assert trace.metadata["layer_statistics"] is True and "full_steps" not in trace.metadata
    assert {parse_name(n).stage for n in trace.statistics} == {"activations", "layer_inputs"}
    assert {parse_name(n).step for n in trace.statistics} == {0, 1}
    assert not any(".activations." in n or ".layer_inputs." in n for n in trace.names)
    assert "step1.params_before.0.weight" in trace.aliases  # the rest as a full record writes it


def test_the_reference_records_the_same_steps_as_statistics(tmp_path, traces):
    _, stats = traces
    model, opt = _model()
    path = record_reference(model, opt, _batch(), tmp_path / "ref.safetensors", steps=STEPS, full_steps=[0, 2],
                            variants=False)
    ref = open_trace(path)
    assert ref.metadata["full_steps"] == [0, 2]
    assert {n for n in ref.statistics if ".layer_inputs." not in n} == \
        {n for n in stats.statistics if ".layer_inputs." not in n}
    assert {s.dtype for s in ref.statistics.values()} == {"F64"}


def test_record_with_a_reference_passes_full_steps_on(tmp_path):
    model, opt = _model()
    record(model, opt, _batch(), tmp_path / "t.safetensors", steps=2, full_steps=[-1],
           reference=tmp_path / "ref.safetensors", reference_variants=False)
    for name in ("t", "ref"):
        trace = open_trace(tmp_path / f"{name}.safetensors")
        assert trace.metadata["full_steps"] == [1]
        assert {parse_name(n).step for n in trace.statistics} == {0}
        assert "step0.params_before.0.weight" in trace and "step0.inputs.x" in trace


def test_an_accumulating_loop_records_micro_logits_as_statistics(tmp_path):
    model, opt = _model()
    trace = open_trace(record(model, opt, _batch(), tmp_path / "t.safetensors", steps=2, accumulate=2,
                              full_steps=[0]))
    assert "step1.micro_logits.0" in trace.statistics and "step1.micro_logits.1" in trace.statistics
    assert "step1.micro_inputs.0.x" in trace and "step1.micro_loss.0" in trace and "step1.loss" in trace
    assert {parse_name(n).step for n in trace.statistics} == {1}


def test_statistics_shrink_the_file(tmp_path):
    """8 Adam steps of a 0.27M-parameter MLP: full_steps=[0, -1] writes well under half the bytes."""
    model, opt = _model(width=32768)
    full = record(model, opt, _batch(), tmp_path / "full.safetensors", steps=8)
    model, opt = _model(width=32768)
    stats = record(model, opt, _batch(), tmp_path / "stats.safetensors", steps=8, full_steps=[0, -1])
    assert stats.stat().st_size < 0.4 * full.stat().st_size


@pytest.mark.parametrize(("full_steps", "message"), [
    ([7], "full_steps=[7]: the loop has 5 steps (0-4, or -5 to -1)"),
    ([0, -6], "full_steps=[0, -6]: the loop has 5 steps (0-4, or -5 to -1)"),
    ("0", "full_steps must be a list of step indices"),
    ([True], "full_steps must be a list of step indices"),
    ([0.5], "full_steps must be a list of step indices"),
])
@pytest.mark.parametrize("reference", [False, True])
def test_a_bad_full_steps_is_refused_before_anything_runs(tmp_path, full_steps, message, reference):
    model, opt = _model()
    before = [p.detach().clone() for p in model.parameters()]
    ref = tmp_path / "ref.safetensors" if reference else None
    with pytest.raises(BurnsideError) as info:
        record(model, opt, _batch(), tmp_path / "t.safetensors", steps=5, full_steps=full_steps, reference=ref)
    assert str(info.value) == message or message in str(info.value)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "t.safetensors").exists() and not (tmp_path / "ref.safetensors").exists()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_a_one_step_loop_names_its_only_step(tmp_path):
    model, opt = _model()
    with pytest.raises(BurnsideError, match=r"full_steps=\[1\]: the loop has 1 step \(0, or -1\)"):
        record(model, opt, _batch(), tmp_path / "t.safetensors", steps=1, full_steps=[1])


def test_layer_statistics_must_be_a_boolean(tmp_path):
    model, opt = _model()
    with pytest.raises(BurnsideError, match="layer_statistics must be True, False or None"):
        record(model, opt, _batch(), tmp_path / "t.safetensors", steps=1, layer_statistics="yes")


def test_the_init_file_carries_full_steps_and_layer_statistics(tmp_path, traces):
    full, stats = traces
    init = open_trace(init_from_trace(stats, tmp_path / "init.safetensors"), kind="init")
    assert init.metadata["full_steps"] == [0, 2] and init.metadata["layer_statistics"] is False
    assert init.statistics == {}
    assert {n for n in init.names if n.startswith("params.")} == {f"params.{p}" for p in stats.params}
    plain = open_trace(init_from_trace(full, tmp_path / "plain.safetensors"), kind="init")
    assert "full_steps" not in plain.metadata and "layer_statistics" not in plain.metadata


def test_export_init_carries_them_too(tmp_path):
    model, _ = _model()
    init = open_trace(export_init(model, _batch(), tmp_path / "init.safetensors", full_steps=[0, -1], steps=3),
                      kind="init")
    assert init.metadata["full_steps"] == [0, 2] and init.metadata["layer_statistics"] is False
    plain = open_trace(export_init(model, _batch(), tmp_path / "plain.safetensors"), kind="init")
    assert "full_steps" not in plain.metadata and "layer_statistics" not in plain.metadata
    with pytest.raises(BurnsideError, match=r"full_steps=\[-1\] counts from the end: give steps=N"):
        export_init(model, _batch(), tmp_path / "x.safetensors", full_steps=[-1])


def test_an_init_from_a_trace_holding_statistics_of_its_start_is_refused(tmp_path, traces):
    """A reader refuses such a file; a `Trace` built by hand with them is refused by init_from_trace too."""
    _, stats = traces
    name = "step0.params_before.0.weight"
    forged = Trace(stats.path, stats.metadata, {n: stats.info(n) for n in stats.names if n != name}, stats.array,
                   statistics={**stats.statistics, name: stats.statistics_of(name)})
    with pytest.raises(BurnsideError, match=f"holds only the statistics of {name}, so there is no starting point"):
        init_from_trace(forged, tmp_path / "init.safetensors")

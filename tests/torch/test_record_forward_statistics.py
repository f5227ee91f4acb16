"""Forward traces of large models recorded small: `record_forward(..., statistics=, full_steps=)` and `record_generate`
record the parameters and, at the batches not in `full_steps`, the layer inputs and activations as statistics
(docs/trace-format.md, "Version 3: statistics"); inputs, outputs and buffers stay full. Real PyTorch models, forced
on (a small model's default is off), the float64 reference beside them; compare judges the load by hash and the
layers where they are full."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch
from torch import nn

import burnside.recording.loop as torch_loop
from burnside.burn.port import init_from_trace
from burnside.compare import compare_traces
from burnside.compare.reference_file import open_reference
from burnside.compare.start_checks import check_start, refuse_statistics_reference
from burnside.errors import BurnsideError, TraceError
from burnside.torch import record_forward, record_generate
from burnside.trace import metadata as trace_metadata
from burnside.trace import open_trace, safetensors_file, statistics_of, write_trace

BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]


class Tagger(nn.Module):
    """Token ids -> embedding -> LayerNorm -> Linear -> GELU -> Linear, with a BatchNorm1d's running statistics
    (buffers) on the way: every kind of tensor a forward trace holds."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.ln = nn.LayerNorm(8, eps=eps)
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(self.ln(self.emb(ids))))
        return self.fc2(self.bn(h.transpose(1, 2)).transpose(1, 2))


def _model(eps: float = 1e-5) -> Tagger:
    torch.manual_seed(0)
    model = Tagger(eps)
    with torch.no_grad():
        model.bn.running_mean.normal_(0.0, 0.3)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model.eval()


def _batches(n: int = 4) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [{"ids": torch.randint(0, 20, (2, 6), generator=generator)} for _ in range(n)]


def _stages(names) -> set[tuple[int, str]]:
    return {(int(n.split(".")[0][4:]), n.split(".")[1]) for n in names}


def test_statistics_record_the_parameters_and_the_layers_outside_full_steps(tmp_path):
    model = _model()
    path = record_forward(model, _batches(), tmp_path / "a.safetensors", statistics=True)
    trace = open_trace(path)
    assert trace.metadata["full_steps"] == [0, 3] and trace.metadata["params_statistics"] is True
    assert trace.metadata["layer_statistics"] is False
    held = _stages(trace.statistics)
    assert held == {(0, "params_before"), (1, "layer_inputs"), (1, "activations"), (2, "layer_inputs"),
                    (2, "activations")}, held
    assert set(trace.params) == {n.removeprefix("step0.params_before.") for n in trace.statistics
                                 if ".params_before." in n}
    # in full: the inputs, outputs and buffers of every batch, the layers of the full batches, and the embedding's
    # integer input (token ids are never statistics)
    for k in range(4):
        assert f"step{k}.inputs.ids" in trace and f"step{k}.outputs.output" in trace
    assert "step0.buffers.bn.running_var" in trace and "step1.layer_inputs.emb" in trace
    for k in (0, 3):
        assert f"step{k}.activations.fc1" in trace and f"step{k}.layer_inputs.fc2" in trace
    # the statistics are those of the tensors a full recording holds, bit for bit
    full = open_trace(record_forward(model, _batches(), tmp_path / "full.safetensors", statistics=False))
    assert "full_steps" not in full.metadata and not full.statistics
    for name, stats in trace.statistics.items():
        assert full.statistics_of(name) == stats, name


def test_statistics_are_on_by_default_from_the_layer_statistics_size(tmp_path, monkeypatch):
    model, batches = _model(), _batches(3)
    small = open_trace(record_forward(model, batches, tmp_path / "small.safetensors"))
    assert not small.statistics and "params_statistics" not in small.metadata
    size = sum(p.numel() for p in model.parameters())
    monkeypatch.setattr(torch_loop, "LAYER_STATISTICS_ABOVE", size)  # the rule `record` follows, at this size
    large = open_trace(record_forward(model, batches, tmp_path / "large.safetensors"))
    assert large.metadata["full_steps"] == [0, 2] and "step1.activations.fc1" in large.statistics
    # full_steps alone asks for statistics
    asked = open_trace(record_forward(model, batches, tmp_path / "asked.safetensors", full_steps=[-1],
                                      statistics=None))
    assert asked.metadata["full_steps"] == [2]


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"statistics": False, "full_steps": [0]}, "full_steps=[0] with statistics=False"),
    ({"statistics": True, "full_steps": [7]}, "full_steps=[7]: the loop has 4 steps"),
    ({"statistics": "yes"}, "statistics must be True, False or None"),
])
def test_a_statistics_request_that_cannot_be_met_is_refused_before_anything_is_written(tmp_path, kwargs, says):
    with pytest.raises(BurnsideError, match=says.replace("[", r"\[").replace("]", r"\]")):
        record_forward(_model(), _batches(), tmp_path / "a.safetensors", reference=tmp_path / "r.safetensors",
                       **kwargs)
    assert not list(tmp_path.iterdir())


def test_the_reference_records_the_same_statistics_and_starts_where_the_trace_does(tmp_path):
    model, batches = _model(), _batches()
    trace = open_trace(record_forward(model, batches, tmp_path / "a.safetensors", statistics=True,
                                      reference=tmp_path / "r.safetensors"))
    reference = open_reference(tmp_path / "r.safetensors")
    assert set(reference.trace.statistics) == set(trace.statistics)
    assert reference.trace.metadata["full_steps"] == [0, 3]
    for name in trace.statistics:
        if ".params_before." in name:  # float32 widened to float64: the same sums, the same largest magnitude
            mine, theirs = trace.statistics[name], reference.trace.statistics[name]
            assert (mine.mean, mine.norm, mine.max_abs) == (theirs.mean, theirs.norm, theirs.max_abs)
            assert theirs.dtype == "F64"
    check_start(trace, reference)
    refuse_statistics_reference(trace, trace, reference)
    comparison = compare_traces(trace, open_trace(tmp_path / "a.safetensors"), reference=reference)
    assert comparison.passed and not comparison.loading
    # a model one weight away is not where the reference starts
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.fc1.weight[2, 3] += 1e-3
    moved = open_trace(record_forward(other, batches, tmp_path / "b.safetensors", statistics=True))
    with pytest.raises(TraceError, match="step0.params_before.fc1.weight .recorded as statistics. has mean"):
        check_start(moved, reference)


def _compare(a, b, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([*BURNSIDE, "compare", str(a), str(b), *extra], capture_output=True, text=True,
                          timeout=300)


def test_a_load_slip_fails_at_the_load_check_naming_the_parameter(tmp_path):
    model, batches = _model(), _batches()
    a = record_forward(model, batches, tmp_path / "a.safetensors", statistics=True)
    slipped = copy.deepcopy(model)
    with torch.no_grad():
        slipped.fc2.weight[1, 4] += 1e-3
    b = record_forward(slipped, batches, tmp_path / "b.safetensors", statistics=True)
    proc = _compare(a, b)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    d014 = [line for line in proc.stdout.splitlines() if line.startswith("D014 ")]
    assert d014 and "fc2.weight: B's bytes are not A's: max|A - B| is at least" in d014[0], proc.stdout
    assert "fc1.weight" not in d014[0], d014
    # the others bit-identical by their hashes
    assert "step0.params_before.fc1.weight" in proc.stdout and "bit-identical" in proc.stdout
    # a weight transposed in place (a square one keeps its shape): the same values in another order
    square = nn.Linear(8, 8)
    torch.manual_seed(3)
    wa = nn.Sequential(square)
    wb = copy.deepcopy(wa)
    with torch.no_grad():
        wb[0].weight.copy_(wa[0].weight.T)
    x = [{"x": torch.randn(2, 8)}]
    proc = _compare(record_forward(wa, x, tmp_path / "sa.safetensors", statistics=True),
                    record_forward(wb, x, tmp_path / "sb.safetensors", statistics=True))
    assert proc.returncode == 1 and "most likely A's values in another order" in proc.stdout, proc.stdout


def test_a_compute_slip_fails_at_its_layer_where_full_and_statistics_show_it_elsewhere(tmp_path):
    batches = _batches()
    a = record_forward(_model(), batches, tmp_path / "a.safetensors", statistics=True)
    b = record_forward(_model(eps=1e-2), batches, tmp_path / "b.safetensors", statistics=True)
    proc = _compare(a, b)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "first divergence: step0.activations.ln " in proc.stdout, proc.stdout
    assert "first diverging layer per batch: batch 0 ln," in proc.stdout and "batch 3 ln" in proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith("D014 ")], proc.stdout
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("step")}
    for k in (1, 2):  # the statistics prove the layer beyond the tolerance at the batches between
        assert "out of tolerance" in rows[f"step{k}.activations.ln"], rows[f"step{k}.activations.ln"]
        assert "bit-identical" in rows[f"step{k}.activations.emb"]


def test_the_init_file_of_a_statistics_trace_holds_no_parameters_and_says_so(tmp_path):
    trace = open_trace(record_forward(_model(), _batches(), tmp_path / "a.safetensors", statistics=True))
    init = open_trace(init_from_trace(trace, tmp_path / "init.safetensors"), kind="init")
    assert not [n for n in init.names if n.startswith("params.")]
    assert init.metadata["params_statistics"] is True and init.metadata["full_steps"] == [0, 3]
    assert init.metadata["params"] == trace.params
    assert "step0.layer_inputs.fc1" in init and "step1.layer_inputs.fc1" not in init


def test_record_generate_records_the_parameters_as_statistics_and_every_step_s_layers_in_full(tmp_path):
    """A decode step's layers are one token's: with statistics on, only the parameters are statistics unless
    ``full_steps`` names fewer steps (a slip at a decode step is then judged at its layer, not from statistics)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(30, 8), nn.Linear(8, 30)).eval()

    def step(model, ids, positions, cache):
        return model(ids), None

    trace = open_trace(record_generate(model, torch.tensor([[1, 2, 3]]), tmp_path / "g.safetensors", steps=3,
                                       step=step, statistics=True, reference=tmp_path / "r.safetensors"))
    assert trace.metadata["full_steps"] == [0, 1, 2, 3] and trace.metadata["generation"]["steps"] == 3
    assert all(f"step{k}.activations.1" in trace for k in range(4))
    assert set(trace.statistics) == {"step0.params_before.0.weight", "step0.params_before.1.weight",
                                     "step0.params_before.1.bias"}
    assert all(f"step{k}.outputs.output" in trace for k in range(4))
    assert set(open_trace(tmp_path / "r.safetensors").statistics) == set(trace.statistics)
    # fewer full steps when asked
    trace = open_trace(record_generate(model, torch.tensor([[1, 2, 3]]), tmp_path / "h.safetensors", steps=3,
                                       step=step, statistics=True, full_steps=[0, -1]))
    assert trace.metadata["full_steps"] == [0, 3] and "step1.activations.1" in trace.statistics


def test_a_forward_trace_whose_statistics_break_its_rules_is_one_line(tmp_path):
    trace = open_trace(record_forward(_model(), _batches(2), tmp_path / "a.safetensors", statistics=False))
    tensors = {n: trace.array(n) for n in trace.names}
    for name in ("step1.outputs.output", "step0.buffers.bn.running_var"):
        stats = {name: statistics_of(tensors.pop(name), "F32")}
        bad = tmp_path / f"bad-{name.split('.')[1]}.safetensors"
        with pytest.raises(TraceError, match="a forward trace holds its"):
            write_trace(bad, tensors, trace.metadata, statistics=stats)
        tensors[name] = trace.array(name)
    # written anyway (another writer), a reader refuses it in one line: exit 2
    name = "step1.outputs.output"
    held = {n: a for n, a in tensors.items() if n != name}
    encoded = trace_metadata.encode(trace.metadata, "trace")
    encoded["burnside.version"] = "3"
    encoded["statistics"] = json.dumps({name: statistics_of(tensors[name], "F32").to_json()})
    bad = tmp_path / "bad.safetensors"
    safetensors_file.write(bad, held, encoded)
    proc = _compare(bad, tmp_path / "a.safetensors")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "corrupt trace (statistics of 'step1.outputs.output': a forward trace holds its " \
        "outputs in full" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_training_trace_still_holds_its_start_in_full(tmp_path):
    trace = open_trace(record_forward(_model(), _batches(1), tmp_path / "a.safetensors", statistics=False))
    tensors = {n: trace.array(n) for n in trace.names}
    name = "step0.params_before.fc1.weight"
    stats = {name: statistics_of(tensors.pop(name), "F32")}
    metadata = {k: v for k, v in trace.metadata.items() if k != "kind"}  # no kind: a training trace
    with pytest.raises(TraceError, match="step0.params_before is never statistics in a training trace"):
        write_trace(tmp_path / "t.safetensors", tensors, metadata, statistics=stats)

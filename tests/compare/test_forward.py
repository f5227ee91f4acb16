"""Comparing two forward traces: the kind check, the loading check (D014), the first divergence where a
shape starts to differ, and the metrics an inference port's outputs are judged by.

Side A is a PyTorch model recorded by `burnside.torch.record_forward`; side B stands for the port: the
same model loaded with the fault under test, recorded the same way and marked as burn's.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.errors import TraceError
from burnside.pipeline import compare_with_evidence
from burnside.torch import record, record_forward
from burnside.trace import open_trace, write_trace


class Net(nn.Module):
    """A classifier with each kind of tensor a loader can get wrong: Linear, BatchNorm, GRU."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)
        self.gru = nn.GRU(8, 5, batch_first=True)
        self.head = nn.Linear(5, 4)

    def forward(self, x):
        h = torch.relu(self.bn(self.fc(x)))
        y, _ = self.gru(h.unsqueeze(1))
        return self.head(y[:, 0])


def checkpoint() -> Net:
    torch.manual_seed(0)
    model = Net()
    with torch.no_grad():  # as trained: running statistics away from 0 / 1
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    return model


def batches(n: int = 2) -> list[dict[str, torch.Tensor]]:
    torch.manual_seed(1)
    return [{"x": torch.randn(6, 8)} for _ in range(n)]


def as_burn(path: Path, edit=None) -> Path:
    """Mark a trace as the burn port's; ``edit(tensors)`` changes its tensors first."""
    trace = open_trace(path)
    tensors = {n: np.array(trace.array(n)) for n in trace.names}
    if edit is not None:
        edit(tensors)
    write_trace(path, tensors, trace.metadata | {"framework": "burn", "framework_version": "0.22.1"})
    return path


@pytest.fixture
def torch_trace(tmp_path) -> Path:
    return record_forward(checkpoint(), batches(), tmp_path / "a.safetensors")


def port_trace(tmp_path: Path, load=None, edit=None, model=None) -> Path:
    port = copy.deepcopy(model or checkpoint())
    if load is not None:
        with torch.no_grad():
            load(port)
    path = record_forward(port, batches(), tmp_path / "b.safetensors")
    return as_burn(path, edit)


def judged(a: Path, b: Path):
    comparison = compare_with_evidence(a, b)
    return comparison, diagnose(comparison)


def faults(comparison) -> dict[str, str]:
    return {f.tensor: f.kind for f in comparison.loading}


def test_a_correct_load_passes_with_no_loading_fault_and_exact_metrics(tmp_path, torch_trace):
    comparison, found = judged(torch_trace, port_trace(tmp_path))
    assert comparison.passed and comparison.forward and comparison.unit == "batch"
    assert not comparison.loading and not found
    outputs = [r for r in comparison.rows if r.metrics is not None]
    assert [r.name for r in outputs] == ["step0.outputs.output", "step1.outputs.output"]
    for row in outputs:
        assert row.metrics.relative_error == 0.0 and row.metrics.cosine == pytest.approx(1.0, abs=1e-12)
        assert row.metrics.top1 == 1.0 and row.metrics.rows == 6


def test_the_start_includes_the_buffers_as_loaded_right_after_the_parameters(tmp_path, torch_trace):
    comparison, _ = judged(torch_trace, port_trace(tmp_path))
    names = [r.name for r in comparison.rows]
    last_param = max(i for i, n in enumerate(names) if n.startswith("step0.params_before."))
    buffers = [i for i, n in enumerate(names) if n.startswith("step0.buffers.")]
    first_layer = min(i for i, n in enumerate(names) if ".layer_inputs." in n or ".activations." in n)
    assert buffers and last_param < min(buffers) and max(buffers) < first_layer
    assert comparison.is_start("step0.buffers.bn.running_mean")


def test_each_loading_fault_is_named_with_its_fault_and_fix(tmp_path, torch_trace):
    hidden = 5

    def load(port):
        port.bn.reset_running_stats()  # running statistics fresh
        w = port.gru.weight_ih_l0.clone()  # gates stored z, r, n
        port.gru.weight_ih_l0.copy_(torch.cat([w[hidden:2 * hidden], w[:hidden], w[2 * hidden:]]))
        port.fc.weight.copy_(port.fc.weight.T.clone())  # a square weight loaded transposed
        torch.manual_seed(7)
        nn.init.kaiming_uniform_(port.head.weight)  # not loaded: a fresh initialisation
        port.gru.bias_hh_l0.copy_(port.gru.bias_hh_l0.half().float())  # through f16

    comparison, found = judged(torch_trace, port_trace(tmp_path, load))
    assert faults(comparison) == {"bn.running_mean": "fresh_stats", "bn.running_var": "fresh_stats",
                                  "gru.weight_ih_l0": "gate_order", "fc.weight": "transposed",
                                  "head.weight": "not_loaded", "gru.bias_hh_l0": "dtype_narrowed"}
    assert not comparison.passed
    d014 = [d for d in found if d.rule == "D014"]
    text = " | ".join(f"{d.evidence} FIX {d.fix}" for d in d014)
    assert "gate order z,r,n where PyTorch's GRU stacks r,z,n" in text
    assert "B's running_mean is all 0" in text and "B's running_var is all 1" in text
    assert "not loaded from the checkpoint: burn-store skips a tensor whose name it cannot match" in text
    assert "B holds A's values rounded to f16" in text
    assert "transposed" in text and all(d.fix for d in d014)
    # the loading faults replace the generic start lines: no D006, no "not bit-identical" line for them
    assert "D006" not in {d.rule for d in found}
    from burnside.report.table import structure_lines
    assert not [line for line, _ in structure_lines(comparison) if "not bit-identical" in line]


def test_an_lstm_in_another_gate_order_is_named_with_the_order_found(tmp_path):
    torch.manual_seed(3)
    lstm = nn.LSTM(3, 4, batch_first=True)
    batch = [{"x": torch.randn(2, 5, 3)}]
    a = record_forward(lstm, batch, tmp_path / "a.safetensors", forward=lambda m, b: m(b["x"])[0])
    port = copy.deepcopy(lstm)
    with torch.no_grad():  # stored i, f, o, g (a port that mapped the gates as Keras orders them)
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            i, f, g, o = getattr(port, name).clone().chunk(4)
            getattr(port, name).copy_(torch.cat([i, f, o, g]))
    b = as_burn(record_forward(port, batch, tmp_path / "b.safetensors", forward=lambda m, b: m(b["x"])[0]))
    comparison, found = judged(a, b)
    assert set(faults(comparison).values()) == {"gate_order"} and len(comparison.loading) == 4
    assert "gate order i,f,o,g where PyTorch's LSTM stacks i,f,g,o" in comparison.loading[0].evidence


def test_tensors_on_one_side_only_a_narrower_dtype_and_a_rectangular_transpose(tmp_path, torch_trace):
    def edit(tensors):
        del tensors["step0.params_before.head.bias"]  # nothing in the port holds it
        tensors["step0.params_before.extra.scale"] = np.ones(3, dtype=np.float32)
        tensors["step0.params_before.gru.weight_hh_l0"] = tensors["step0.params_before.gru.weight_hh_l0"].T.copy()
        tensors["step0.params_before.fc.bias"] = tensors["step0.params_before.fc.bias"].astype(np.float16)

    def metadata_params(path):  # the port's params list names what it holds
        trace = open_trace(path)
        tensors = {n: np.array(trace.array(n)) for n in trace.names}
        params = [p for p in trace.params if p != "head.bias"] + ["extra.scale"]
        write_trace(path, tensors, trace.metadata | {"params": params})

    b = port_trace(tmp_path, edit=edit)
    metadata_params(b)
    comparison, found = judged(torch_trace, b)
    assert faults(comparison) == {"head.bias": "only_in_a", "extra.scale": "only_in_b",
                                  "gru.weight_hh_l0": "transposed", "fc.bias": "dtype_narrowed"}
    # named once, by D014: not again as "only in", shape or dtype problems
    assert not comparison.only_in_a and not comparison.only_in_b and not comparison.structure
    evidence = " ".join(d.evidence for d in found if d.rule == "D014")
    assert "nothing in the port holds the parameter head.bias" in evidence
    assert "B holds it as F16, A as F32" in evidence
    assert "D007" not in {d.rule for d in found}


def test_a_forward_trace_against_a_training_trace_is_refused_in_one_line(tmp_path, torch_trace):
    model = checkpoint()
    training = record(model, torch.optim.SGD(model.parameters(), lr=0.1),
                      {"x": torch.randn(6, 8), "y": torch.randint(0, 4, (6,))}, tmp_path / "t.safetensors",
                      forward=lambda m, b: m(b["x"]))
    with pytest.raises(TraceError) as refused:
        compare_with_evidence(torch_trace, training)
    message = str(refused.value)
    assert "\n" not in message
    assert (f"A ({torch_trace}) is a forward trace (pytorch, as burnside.torch.record_forward records)" in message
            and f"B ({training}) a training trace (pytorch, as burnside.torch.record records)" in message)
    burn_training = as_burn(training)
    run = _cli("compare", str(burn_training), str(torch_trace))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "a training trace (burn, as burnside_trace::Training records)" in run.stderr
    assert "a forward trace (pytorch, as burnside.torch.record_forward records)" in run.stderr


class ConvNet(nn.Module):
    """A convolution whose output is pooled back to one size: a forgotten stride changes the conv's shape
    only, and every layer after it has the same shapes on both sides again."""

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, stride=stride, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.flat = nn.Flatten()
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.norm(self.flat(self.pool(self.conv(x)))))


def _conv_pair(tmp_path: Path):
    torch.manual_seed(5)
    model = ConvNet(stride=2)
    port = ConvNet(stride=1)
    port.load_state_dict(model.state_dict())
    return model, port


def test_a_forgotten_stride_is_the_first_divergence_in_a_forward_trace(tmp_path):
    model, port = _conv_pair(tmp_path)
    batch = [{"x": torch.randn(2, 2, 8, 8)}]
    a = record_forward(model, batch, tmp_path / "a.safetensors")
    b = as_burn(record_forward(port, batch, tmp_path / "b.safetensors"))
    comparison, _ = judged(a, b)
    assert not comparison.loading  # the weights are the checkpoint's
    assert comparison.first_divergence_name == "step0.activations.conv"
    assert (comparison.first_shape_divergence.a == "[2, 4, 4, 4]"
            and comparison.first_shape_divergence.b == "[2, 4, 8, 8]")
    assert comparison.first_divergence is None  # no later row is offered as the cause
    assert any(r.name == "step0.activations.norm" and not r.passed for r in comparison.rows)
    assert comparison.first_divergence_by_step() == {0: "step0.activations.conv"}
    from burnside.report.table import finding_lines
    text = " ".join(line for line, _ in finding_lines(comparison))
    assert "first divergence: step0.activations.conv (Conv2d) in batch 0: its shape is [2, 4, 4, 4] in A" in text


def test_a_forgotten_stride_is_the_first_divergence_in_a_training_trace(tmp_path):
    model, port = _conv_pair(tmp_path)
    batch = {"x": torch.randn(2, 2, 8, 8), "y": torch.randint(0, 3, (2,))}

    def run(m, path):
        return record(m, torch.optim.SGD(m.parameters(), lr=0.1), batch, path, forward=lambda m, b: m(b["x"]))

    a = run(model, tmp_path / "a.safetensors")
    b = as_burn(run(port, tmp_path / "b.safetensors"))
    comparison, _ = judged(a, b)
    assert comparison.kind == "training"
    assert comparison.first_divergence_name == "step0.activations.conv"


def test_top1_agreement_counts_the_rows_whose_argmax_agrees(tmp_path, torch_trace):
    def load(port):
        torch.manual_seed(9)
        port.head.bias.add_(torch.randn(4) * 0.5)  # moves some rows' winning class

    b = port_trace(tmp_path, load)
    comparison, _ = judged(torch_trace, b)
    ta, tb = open_trace(torch_trace), open_trace(b)
    for k in (0, 1):
        name = f"step{k}.outputs.output"
        xa, xb = ta.values(name).astype(np.float64), tb.values(name).astype(np.float64)
        row = next(r for r in comparison.rows if r.name == name)
        agree = int(np.sum(xa.argmax(1) == xb.argmax(1)))
        assert (row.metrics.top1_agree, row.metrics.rows) == (agree, 6)
        assert row.metrics.relative_error == pytest.approx(np.linalg.norm(xb - xa) / np.linalg.norm(xa), rel=1e-12)
        cos = float((xa * xb).sum() / np.linalg.norm(xa) / np.linalg.norm(xb))
        assert row.metrics.cosine == pytest.approx(cos, rel=1e-12)
    assert faults(comparison) == {"head.bias": "altered"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_cli_reports_batches_the_loading_faults_and_the_metrics(tmp_path, torch_trace):
    b = port_trace(tmp_path, lambda port: port.bn.reset_running_stats())
    text = _cli("compare", str(torch_trace), str(b))
    assert text.returncode == 1, text.stderr
    out = " ".join(text.stdout.split())
    assert "D014 weights not loaded as in the checkpoint: running statistics fresh: bn.running_mean" in out
    assert "in batch 0" in out and "first diverging layer per batch: batch 0 bn, batch 1 bn" in out
    assert "step0.outputs.output: relative error" in out and "top-1 agreement" in out
    doc = json.loads(_cli("compare", "--json", str(torch_trace), str(b)).stdout)
    assert doc["kind"] == "forward" and not doc["passed"]
    assert {f["tensor"]: f["kind"] for f in doc["loading"]} == {"bn.running_mean": "fresh_stats",
                                                                 "bn.running_var": "fresh_stats"}
    output = next(t for t in doc["tensors"] if t["name"] == "step1.outputs.output")
    assert set(output["metrics"]) == {"relative_error", "cosine", "top1_agreement", "top1_rows", "top1_agree"}
    assert doc["first_divergence"] == "step0.buffers.bn.running_mean"
    report = tmp_path / "r.html"
    run = _cli("report", str(torch_trace), str(b), "-o", str(report))
    assert run.returncode == 1, run.stderr
    page = report.read_text()
    assert "top-1 agreement" in page and "batch 1" in page and "D014" in page


def test_junit_names_each_loading_fault_as_a_failing_case(tmp_path, torch_trace):
    from burnside.report.junit import comparison_junit

    def edit(tensors):
        del tensors["step0.params_before.head.bias"]

    b = port_trace(tmp_path, lambda port: port.bn.reset_running_stats(), edit=edit)
    comparison, found = judged(torch_trace, b)
    xml = comparison_junit(comparison, found)
    assert xml.count('type="loading"') == 3
    assert 'name="step0.params_before.head.bias"' in xml and "fresh_stats" in xml


def test_a_linear_weight_reshaped_where_it_needed_a_transpose_is_named(tmp_path, torch_trace):
    # A port that copies a [out, in] Linear weight into burn's [in, out] by reshaping it, in file order:
    # the shapes fit, so nothing fails to load; recorded back in PyTorch's layout it is the reshape's transpose.
    def edit(tensors):
        w = tensors["step0.params_before.head.weight"]  # [4, 5]
        tensors["step0.params_before.head.weight"] = w.reshape(w.shape[::-1]).T.copy()

    comparison, found = judged(torch_trace, port_trace(tmp_path, edit=edit))
    assert faults(comparison) == {"head.weight": "transposed"}
    assert "reshaped to [5, 4] (burn's [in, out]) where they needed a transpose" in comparison.loading[0].evidence
    assert [d.rule for d in found][:1] == ["D014"]


def test_attention_with_query_and_key_swapped_in_in_proj_is_named_with_the_order_found(tmp_path):
    torch.manual_seed(4)
    attn = nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():  # as trained: PyTorch initialises in_proj_bias to zeros, whose blocks all look alike
        attn.in_proj_bias.uniform_(-0.5, 0.5)
    batch = [{"x": torch.randn(2, 5, 8)}]
    forward = lambda m, b: m(b["x"], b["x"], b["x"])[0]  # noqa: E731
    a = record_forward(attn, batch, tmp_path / "a.safetensors", forward=forward)
    port = copy.deepcopy(attn)
    with torch.no_grad():  # a port that cut in_proj as key, query, value
        for name in ("in_proj_weight", "in_proj_bias"):
            q, k, v = getattr(port, name).clone().chunk(3)
            getattr(port, name).copy_(torch.cat([k, q, v]))
    b = as_burn(record_forward(port, batch, tmp_path / "b.safetensors", forward=forward))
    comparison, found = judged(a, b)
    assert faults(comparison) == {"in_proj_weight": "gate_order", "in_proj_bias": "gate_order"}
    assert "in the order k,q,v where PyTorch's MultiheadAttention stacks q,k,v" in comparison.loading[0].evidence
    assert [d.rule for d in found][:1] == ["D014"] and "load_pytorch_checkpoint" in found[0].fix


def test_a_field_named_otherwise_and_left_unloaded_is_named_as_one_tensor_renamed(tmp_path, torch_trace):
    """The port's field `head.kernel` where PyTorch has `head.weight`, loaded with allow_partial(true) so burn-store
    skipped it and kept its initialisation: one tensor on each side of that shape, other values. Both faults say it
    is the same tensor named otherwise, and no forward bug is named from a start that is not PyTorch's."""
    def edit(tensors):
        weight = tensors.pop("step0.params_before.head.weight")
        tensors["step0.params_before.head.kernel"] = (np.random.default_rng(0).normal(size=weight.shape)
                                                      .astype(np.float32))

    b = port_trace(tmp_path, edit=edit)
    trace = open_trace(b)
    tensors = {n: np.array(trace.array(n)) for n in trace.names}
    write_trace(b, tensors, trace.metadata | {"params": [p if p != "head.weight" else "head.kernel"
                                                         for p in trace.params]})
    comparison, found = judged(torch_trace, b)
    assert faults(comparison) == {"head.weight": "only_in_a", "head.kernel": "only_in_b"}, faults(comparison)
    a_fault = next(f for f in comparison.loading if f.tensor == "head.weight")
    assert "B holds a tensor head.kernel of the same shape" in a_fault.evidence, a_fault
    assert "B calls it head.kernel" in a_fault.fix and "allow_partial(true)" in a_fault.fix, a_fault
    b_fault = next(f for f in comparison.loading if f.tensor == "head.kernel")
    assert "name it head.weight as PyTorch does" in b_fault.fix, b_fault
    assert {d.rule for d in found} == {"D014"}, [(d.rule, d.evidence) for d in found]


def test_a_packed_tensor_left_unloaded_is_told_the_loader_that_cuts_it(tmp_path, torch_trace):
    """A GRU's stacked `weight_ih_l0` freshly initialised (PytorchStore cannot cut it into burn's gates): the fix is
    `load_pytorch_checkpoint`, not a name remapping, which cannot cut a tensor."""
    def fresh(port):
        nn.init.uniform_(port.gru.weight_ih_l0, -0.4, 0.4)
        nn.init.uniform_(port.fc.weight, -0.3, 0.3)

    comparison, _ = judged(torch_trace, port_trace(tmp_path, load=fresh))
    by_tensor = {f.tensor: f for f in comparison.loading}
    assert by_tensor["gru.weight_ih_l0"].kind == "not_loaded", by_tensor
    assert "load_pytorch_checkpoint" in by_tensor["gru.weight_ih_l0"].fix, by_tensor["gru.weight_ih_l0"].fix
    # an ordinary tensor is still told to check the name mapping
    assert by_tensor["fc.weight"].kind == "not_loaded" and "with_key_remapping" in by_tensor["fc.weight"].fix


def test_a_bf16_checkpoint_loaded_into_an_f32_port_is_judged_value_for_value(tmp_path):
    """A records the bf16 model, B the f32 model holding its weights: the loading check widens A's bf16 weights
    exactly and finds B's equal (no fault, every start row 0 apart); B's weight cast through f16 on the way is
    named, and B holding the bf16 words unconverted where A's are f32 is named with the cast to add."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    with torch.no_grad():
        model[0].weight[0, 0] = 1e-6  # below f16's normal range: through f16 it loses bits
    half = copy.deepcopy(model).to(torch.bfloat16)
    f32 = copy.deepcopy(model)
    f32.load_state_dict(half.state_dict())  # the exact widening
    data = [{"x": torch.randn(5, 4)}]
    a = record_forward(half, [{"x": data[0]["x"].bfloat16()}], tmp_path / "a.safetensors")
    b = as_burn(record_forward(f32, data, tmp_path / "b.safetensors"))
    comparison, found = judged(a, b)
    assert not comparison.loading and not [d for d in found if d.rule == "D014"]
    start = [r for r in comparison.rows if r.name.startswith("step0.params_before.")]
    assert len(start) == 4 and all(r.dtype == "F32" and r.stats.identical for r in start)

    def via_f16(tensors):
        w = tensors["step0.params_before.0.weight"]
        tensors["step0.params_before.0.weight"] = w.astype(np.float16).astype(np.float32)

    comparison, found = judged(a, as_burn(record_forward(f32, data, tmp_path / "b.safetensors"), via_f16))
    assert faults(comparison) == {"0.weight": "dtype_narrowed"}
    assert "B holds A's values rounded to f16 (stored as F32)" in comparison.loading[0].evidence

    a32 = record_forward(f32, data, tmp_path / "a32.safetensors")
    kept = as_burn(record_forward(half, [{"x": data[0]["x"].bfloat16()}], tmp_path / "kept.safetensors"))
    comparison, _ = judged(a32, kept)
    assert set(faults(comparison).values()) == {"dtype_narrowed"} and len(comparison.loading) == 4
    fault = comparison.loading[0]
    assert "B holds it as BF16, A as F32: the same values, not converted" in fault.evidence
    assert "PyTorchToBurnAdapter.chain(FloatCastAdapter::to(DType::F32))" in fault.fix

"""`record(..., accumulate=M)`: a PyTorch loop that accumulates gradients over M micro-batches per optimizer step,
recorded under `step{k}.micro_*.{j}` names with metadata `accumulate`; a trace without accumulation is unchanged;
the names and the metadata are checked by every reader; traces accumulating otherwise compare to one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from burnside.compare import compare_traces
from burnside.errors import BurnsideError, TraceError
from burnside.torch import record
from burnside.trace import open_trace, write_trace
from burnside.trace.names import micro_name, order_key, parse_name

M = 3


def mlp() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))


def micro_batches(n: int) -> list[dict[str, torch.Tensor]]:
    torch.manual_seed(2)
    return [{"x": torch.randn(5, 4), "y": torch.randint(0, 3, (5,))} for _ in range(n)]


def sgd(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def test_the_accumulated_gradient_is_the_sum_a_by_hand_loop_gives(tmp_path):
    batches = micro_batches(2 * M)
    model = mlp()
    trace = open_trace(record(model, sgd(model), batches, tmp_path / "t.safetensors", accumulate=M))
    assert trace.steps == 2 and trace.metadata["accumulate"] == M and trace.metadata["grads_len"] == [4, 4]
    # the same loop by hand
    model = mlp()
    opt = sgd(model)
    for k in range(2):
        opt.zero_grad()
        for j in range(M):
            b = batches[k * M + j]
            F.cross_entropy(model(b["x"]), b["y"]).backward()
        for name, p in model.named_parameters():
            assert trace.array(f"step{k}.grads.{name}").tobytes() == p.grad.numpy().tobytes(), (k, name)
        opt.step()
        for name, p in model.named_parameters():
            assert trace.array(f"step{k}.params_after.{name}").tobytes() == p.detach().numpy().tobytes()
    for j in range(M):
        assert trace.array(micro_name(1, "micro_inputs", j, "x")).tobytes() == batches[M + j]["x"].numpy().tobytes()
    # loss_after: the trained model's losses on the last step's micro-batches, summed
    with torch.no_grad():
        losses = [F.cross_entropy(model(batches[M + j]["x"]), batches[M + j]["y"]) for j in range(M)]
    assert float(trace.array("step1.loss_after")) == pytest.approx(float(sum(losses)), rel=1e-6)


def test_one_batch_serves_every_micro_batch_and_loss_fn_divides_as_the_loop_does(tmp_path):
    batch = micro_batches(1)[0]
    model = mlp()
    summed = open_trace(record(model, sgd(model), batch, tmp_path / "sum.safetensors", steps=1, accumulate=M))
    model = mlp()
    meaned = open_trace(record(model, sgd(model), batch, tmp_path / "mean.safetensors", steps=1, accumulate=M,
                               loss_fn=lambda logits, y: F.cross_entropy(logits, y) / M))
    model = mlp()
    single = open_trace(record(model, sgd(model), batch, tmp_path / "one.safetensors", steps=1))
    g_sum, g_mean, g_one = (t.array("step0.grads.0.weight") for t in (summed, meaned, single))
    np.testing.assert_allclose(g_sum, M * g_one, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g_mean, g_one, rtol=1e-5, atol=1e-7)


def test_a_trace_without_accumulation_is_unchanged(tmp_path):
    model = mlp()
    trace = open_trace(record(model, sgd(model), micro_batches(2), tmp_path / "t.safetensors"))
    assert "accumulate" not in trace.metadata
    assert not any(parse_name(n).stage.startswith("micro_") for n in trace.names)
    assert {"step0.inputs.x", "step0.logits", "step1.loss"} <= set(trace.names)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"accumulate": 0}, "accumulate must be a positive integer"),
    ({"accumulate": 2.0}, "accumulate must be a positive integer"),
    ({"accumulate": M, "steps": 2, "batches": 4}, f"got 4 batches for 2 steps of {M} micro-batches"),
])
def test_refusals_are_one_line(tmp_path, kwargs, message):
    n = kwargs.pop("batches", 2 * M)
    model = mlp()
    with pytest.raises(BurnsideError, match=message):
        record(model, sgd(model), micro_batches(n), tmp_path / "t.safetensors", **kwargs)
    assert not (tmp_path / "t.safetensors").exists()


def test_lbfgs_with_accumulation_is_refused(tmp_path):
    model = mlp()
    with pytest.raises(BurnsideError, match="LBFGS"):
        record(model, torch.optim.LBFGS(model.parameters()), micro_batches(M), tmp_path / "t.safetensors",
               accumulate=M)


def test_the_float64_reference_accumulates_as_the_loop(tmp_path):
    model = mlp()
    record(model, sgd(model), micro_batches(2 * M), tmp_path / "t.safetensors", accumulate=M,
           reference=tmp_path / "r.safetensors")
    ref, trace = open_trace(tmp_path / "r.safetensors"), open_trace(tmp_path / "t.safetensors")
    assert ref.metadata["accumulate"] == M and set(ref.names) == set(trace.names)
    np.testing.assert_allclose(ref.array("step1.grads.0.weight"), trace.array("step1.grads.0.weight"), atol=1e-5)


def test_micro_names_parse_and_order_micro_batch_by_micro_batch():
    parsed = parse_name("step2.micro_inputs.10.tokens.ids")
    assert (parsed.step, parsed.stage, parsed.micro, parsed.micro_rest) == (2, "micro_inputs", 10, "tokens.ids")
    assert parse_name("step0.micro_loss.3").micro == 3 and parse_name("step0.micro_loss.3").micro_rest == ""
    names = ["step0.grads.w", "step0.loss", "step0.micro_loss.1", "step0.micro_inputs.1.x", "step0.micro_logits.0",
             "step0.micro_loss.0", "step0.micro_inputs.0.x", "step0.params_before.w", "step0.micro_loss.10"]
    assert sorted(names, key=lambda n: order_key(n, {"w": 0})) == [
        "step0.params_before.w", "step0.micro_inputs.0.x", "step0.micro_logits.0", "step0.micro_loss.0",
        "step0.micro_inputs.1.x", "step0.micro_loss.1", "step0.micro_loss.10", "step0.loss", "step0.grads.w"]


def _tensors(trace) -> dict:
    return {n: np.array(trace.array(n)) for n in trace.names}


@pytest.mark.parametrize(("change", "message"), [
    (lambda t, m: m.update(accumulate=1), "'accumulate' must be an integer from 2"),
    (lambda t, m: m.update(accumulate="3"), "'accumulate' must be an integer from 2"),
    (lambda t, m: m.pop("accumulate"), "metadata 'accumulate' .* is absent"),
    (lambda t, m: t.update({"step0.micro_loss.3": t["step0.micro_loss.0"]}), f"micro-batch 3, beyond the {M}"),
    (lambda t, m: t.update({"step0.micro_loss.01": t["step0.micro_loss.0"]}), "no micro-batch tensor name"),
    (lambda t, m: t.update({"step0.micro_inputs.0": t["step0.micro_loss.0"]}), "no micro-batch tensor name"),
])
def test_readers_and_writers_check_the_micro_names_against_accumulate(tmp_path, change, message):
    model = mlp()
    trace = open_trace(record(model, sgd(model), micro_batches(M), tmp_path / "t.safetensors", accumulate=M))
    tensors, meta = _tensors(trace), dict(trace.metadata)
    change(tensors, meta)
    with pytest.raises(TraceError, match=message):
        write_trace(tmp_path / "bad.safetensors", tensors, meta)
    # a JSON file with the same fault is refused on reading
    good = tmp_path / "good.json"
    write_trace(good, _tensors(trace), dict(trace.metadata))
    doc = json.loads(good.read_text())
    dtype = {"float32": "F32"}
    doc["metadata"] = {**meta}
    doc["tensors"] = {n: {"dtype": dtype.get(str(a.dtype), "I64"), "shape": list(a.shape),
                          "data": a.reshape(-1).tolist()} for n, a in tensors.items()}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=message):
        open_trace(bad)


def test_traces_accumulating_otherwise_compare_to_one_structural_line(tmp_path):
    batches = micro_batches(2 * M)
    model = mlp()
    three = open_trace(record(model, sgd(model), batches, tmp_path / "m3.safetensors", steps=2, accumulate=M))
    model = mlp()
    none = open_trace(record(model, sgd(model), batches[:2], tmp_path / "m1.safetensors", steps=2))
    model = mlp()
    two = open_trace(record(model, sgd(model), batches[:4], tmp_path / "m2.safetensors", steps=2, accumulate=2))
    comparison = compare_traces(three, none)
    assert not comparison.passed and not comparison.only_in_a and not comparison.only_in_b
    assert comparison.accumulation == (
        f"gradient accumulation differs: A sums the gradients of {M} micro-batches per optimizer step (metadata "
        f"accumulate {M}), B takes one optimizer step per batch (no accumulate); the steps' batches, losses and "
        "gradients are of other loops")
    comparison = compare_traces(two, three)
    assert not comparison.passed and "A sums the gradients of 2" in comparison.accumulation
    assert "B sums the gradients of 3" in comparison.accumulation
    assert comparison.only_in_b == []  # micro-batch 2 of B is not listed tensor by tensor
    model = mlp()
    longer = record(model, sgd(model), batches, tmp_path / "m1x6.safetensors", steps=6)
    with pytest.raises(TraceError, match="gradient accumulation differs: .* A recorded 2 steps, B 6"):
        compare_traces(three, open_trace(longer))
    assert compare_traces(three, three).passed

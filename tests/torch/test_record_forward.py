"""`burnside.torch.record_forward`: a model's forward passes as a forward trace, and its float64 reference.

Every test runs a real PyTorch model (Conv1d, BatchNorm1d, GELU, a GRU between two transposes, LayerNorm,
Linear) and reads back the file it wrote: the trace must hold what the model computed, bit for bit, under
the names docs/trace-format.md gives, and leave the model as it was given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import burnside
from burnside.compare import open_reference
from burnside.errors import BurnsideError
from burnside.recording.reference import record_forward_reference
from burnside.torch import record_forward
from burnside.trace import open_trace

BATCHES = 3


class _Net(nn.Module):
    """Conv1d -> BatchNorm1d -> GELU -> (transpose) GRU -> LayerNorm -> Linear; ``out`` picks what forward returns."""

    def __init__(self, out: str = "tensor") -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm1d(8)
        self.act = nn.GELU()
        self.gru = nn.GRU(8, 6, batch_first=True)
        self.norm = nn.LayerNorm(6)
        self.head = nn.Linear(6, 4)
        self.out = out

    def forward(self, x: torch.Tensor, scale: torch.Tensor | None = None):
        h = self.act(self.bn(self.conv(x)))
        seq, last = self.gru(h.transpose(1, 2))
        y = self.head(self.norm(seq))
        if scale is not None:
            y = y * scale
        if self.out == "tuple":
            return y, last
        if self.out == "dict":
            return {"logits": y, "state": (last, None), "extra": None}
        if self.out == "str":
            return {"logits": y, "state": [last, "cached"]}
        if self.out == "int":
            return y, 3
        return y


def _model(out: str = "tensor") -> nn.Module:
    torch.manual_seed(0)
    model = _Net(out)
    with torch.no_grad():  # loaded running statistics, not fresh zeros and ones
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
        model.bn.num_batches_tracked.fill_(7)
    return model


def _batches() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [{"x": torch.randn(2, 3, 5, generator=g)} for _ in range(BATCHES)]


def test_a_forward_trace_holds_each_batch_as_the_model_computed_it(tmp_path: Path) -> None:
    model, batches = _model(), _batches()
    model.train()
    path = record_forward(model, batches, tmp_path / "torch.safetensors")
    trace = open_trace(path)
    assert trace.kind == "forward" and trace.steps == BATCHES
    meta = trace.metadata
    assert (meta["framework"], meta["dtype"], meta["mode"], meta["device"]) == ("pytorch", "float32", "eval", "cpu")
    assert meta["outputs"] == ["output"]
    assert meta["activations"] == ["conv", "bn", "act", "gru", "norm", "head"]
    assert meta["layer_inputs"] == ["conv", "bn", "act", "gru", "norm", "head"]
    assert meta["modules"] == {"conv": "Conv1d", "bn": "BatchNorm1d", "act": "GELU", "gru": "GRU",
                               "norm": "LayerNorm", "head": "Linear"}
    assert meta["params"] == [name for name, _ in model.named_parameters()]
    assert meta["buffers"] == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert not any(key in meta for key in ("optimizer", "grads_len", "loss_fn"))
    # no stage of training in a forward trace; params and buffers once, at batch 0
    stages = {name.split(".")[1] for name in trace.names}
    assert stages == {"inputs", "params_before", "buffers", "layer_inputs", "activations", "outputs"}
    assert not any(n.startswith(("step1.params_before", "step1.buffers", "step2.buffers")) for n in trace.names)
    for name, p in model.named_parameters():
        assert np.array_equal(trace.values(f"step0.params_before.{name}"), p.detach().numpy())
    assert trace.info("step0.buffers.bn.num_batches_tracked").dtype == "I64"
    assert int(trace.values("step0.buffers.bn.num_batches_tracked")) == 7
    assert np.array_equal(trace.values("step0.buffers.bn.running_var"), model.bn.running_var.numpy())

    model.eval()
    with torch.no_grad():
        for k, batch in enumerate(batches):
            assert np.array_equal(trace.values(f"step{k}.inputs.x"), batch["x"].numpy())
            conv = model.conv(batch["x"])
            bn = model.bn(conv)
            act = model.act(bn)
            seq, _ = model.gru(act.transpose(1, 2))
            assert np.array_equal(trace.values(f"step{k}.activations.bn"), bn.numpy())
            assert np.array_equal(trace.values(f"step{k}.layer_inputs.bn"), conv.numpy())
            # the GRU's input is what the transpose gave it, its output the sequence (first of the tuple)
            assert np.array_equal(trace.values(f"step{k}.layer_inputs.gru"), act.transpose(1, 2).numpy())
            assert np.array_equal(trace.values(f"step{k}.activations.gru"), seq.numpy())
            assert np.array_equal(trace.values(f"step{k}.outputs.output"), model(batch["x"]).numpy())


def test_the_model_is_left_as_given(tmp_path: Path) -> None:
    model = _model()
    model.train()
    model.norm.eval()  # a mixed model: each submodule's own flag comes back
    before = {name: b.clone() for name, b in model.named_buffers()}
    record_forward(model, _batches(), tmp_path / "eval.safetensors")
    assert model.training and model.bn.training and not model.norm.training

    trace = open_trace(record_forward(model, _batches(), tmp_path / "train.safetensors", eval=False))
    assert trace.metadata["mode"] == "train"
    # a training-mode BatchNorm normalises by the batch's statistics, and updated its running ones: put back
    assert model.training and not model.norm.training
    x = _batches()[0]["x"]
    with torch.no_grad():
        conv = model.conv(x)
        batch_stats = (conv - conv.mean((0, 2), keepdim=True)) / torch.sqrt(conv.var((0, 2), unbiased=False,
                                                                                     keepdim=True) + model.bn.eps)
        expected = batch_stats * model.bn.weight[:, None] + model.bn.bias[:, None]
    np.testing.assert_allclose(trace.values("step0.activations.bn"), expected.numpy(), atol=1e-5)
    for name, b in model.named_buffers():  # train mode moved them while recording, and they came back
        assert torch.equal(b, before[name]), name


def test_tuple_and_dict_outputs_are_named_by_position_and_key(tmp_path: Path) -> None:
    batches = _batches()
    trace = open_trace(record_forward(_model("tuple"), batches, tmp_path / "tuple.safetensors"))
    assert trace.metadata["outputs"] == ["0", "1"]
    assert trace.info("step2.outputs.1").shape == (1, 2, 6)

    model = _model("dict")
    trace = open_trace(record_forward(model, batches, tmp_path / "dict.safetensors"))
    assert trace.metadata["outputs"] == ["logits", "state.0"]  # None values skipped
    model.eval()
    with torch.no_grad():
        out = model(batches[1]["x"])
    assert np.array_equal(trace.values("step1.outputs.logits"), out["logits"].numpy())
    assert np.array_equal(trace.values("step1.outputs.state.0"), out["state"][0].numpy())


def test_a_batch_of_several_tensors_goes_in_by_name_and_forward_can_be_given(tmp_path: Path) -> None:
    model = _model()
    batches = [{"x": b["x"], "scale": torch.full((1,), 2.0)} for b in _batches()]
    trace = open_trace(record_forward(model, batches, tmp_path / "kw.safetensors"))  # model(**batch)
    plain = open_trace(record_forward(model, _batches(), tmp_path / "plain.safetensors"))
    assert np.array_equal(trace.values("step0.outputs.output"), 2 * plain.values("step0.outputs.output"))
    assert "step0.inputs.scale" in trace

    given = open_trace(record_forward(model, batches, tmp_path / "given.safetensors",
                                      forward=lambda m, b: {"y": m(b["x"])}, activations=False, layer_inputs=False))
    assert given.metadata["outputs"] == ["y"]
    assert not any(".activations." in n or ".layer_inputs." in n for n in given.names)
    assert "activations" not in given.metadata and "layer_inputs" not in given.metadata


def test_a_module_called_twice_and_a_module_fed_no_tensor(tmp_path: Path) -> None:
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.ReLU(inplace=True)  # overwrites its input: the recorded input is the one it was fed

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.act(self.fc(x)))

    torch.manual_seed(0)
    model = Shared()
    x = torch.randn(3, 4)
    trace = open_trace(record_forward(model, {"x": x}, tmp_path / "shared.safetensors"))
    assert trace.metadata["activations"] == ["fc", "act", "fc#2"]
    with torch.no_grad():
        first = model.fc(x)
    assert np.array_equal(trace.values("step0.layer_inputs.act"), first.numpy())  # before ReLU zeroed it
    assert (trace.values("step0.layer_inputs.act") < 0).any()
    assert np.array_equal(trace.values("step0.layer_inputs.fc#2"), first.clamp(min=0).numpy())

    class Noise(nn.Module):  # called with no tensor: no layer input, its output is still an activation
        def __init__(self) -> None:
            super().__init__()
            self.bias = nn.Parameter(torch.ones(4))

        def forward(self, n: int) -> torch.Tensor:
            return self.bias * n

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.noise, self.fc = Noise(), nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x + self.noise(2))

    trace = open_trace(record_forward(Outer(), {"x": x}, tmp_path / "outer.safetensors"))
    assert trace.metadata["layer_inputs"] == ["fc"]
    assert trace.metadata["activations"] == ["noise", "fc"]


@pytest.mark.parametrize(("out", "what"), [("str", "a str at output['state'][1]"), ("int", "an int at output[1]")])
def test_an_output_that_is_not_tensors_is_refused_before_anything_is_written(tmp_path: Path, out: str,
                                                                              what: str) -> None:
    path, ref = tmp_path / "t.safetensors", tmp_path / "r.safetensors"
    with pytest.raises(BurnsideError) as refused:
        record_forward(_model(out), _batches(), path, reference=ref)
    message = str(refused.value)
    assert "\n" not in message and what in message and "batch 0" in message
    assert not path.exists() and not ref.exists()

    with pytest.raises(BurnsideError, match=r"forward\(model, batch\) returned an object \(batch 0\)"):
        record_forward(_model(), _batches(), path, forward=lambda m, b: object())
    with pytest.raises(BurnsideError, match="holding no tensor"):
        record_forward(_model(), _batches(), path, forward=lambda m, b: (None,))
    assert list(tmp_path.iterdir()) == []


def test_batches_that_are_not_dicts_of_tensors_are_refused(tmp_path: Path) -> None:
    model, x = _model(), _batches()[0]["x"]
    for batches, match in [(x, "batches is a Tensor"), ([], "at least one batch"), ([x], "batch 0 is a Tensor"),
                           ({"x": x, "train": True}, "batch 0's 'train' is a bool, not a tensor")]:
        with pytest.raises(BurnsideError, match=match):
            record_forward(model, batches, tmp_path / "t.safetensors")
    with pytest.raises(BurnsideError, match="no parameters"):
        record_forward(nn.GELU(), {"x": x}, tmp_path / "t.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_the_reference_is_a_float64_forward_trace_of_the_same_passes(tmp_path: Path) -> None:
    model, batches = _model("dict"), _batches()
    batches = [{**b, "ids": torch.arange(2)} for b in batches]
    told: list[tuple] = []
    path = burnside.record_forward(model, batches, tmp_path / "t.safetensors", reference=tmp_path / "r.safetensors",
                                   forward=lambda m, b: m(b["x"]),
                                   progress=lambda done, total, part=None: told.append((done, total, part)))
    trace, ref = open_trace(path), open_reference(tmp_path / "r.safetensors")
    assert ref.variants == {}
    meta = ref.trace.metadata
    assert (meta["kind"], meta["dtype"], meta["reference"], ref.trace.steps) == ("forward", "float64", "float64", 3)
    assert "reference" not in trace.metadata and trace.metadata["dtype"] == "float32"
    assert ref.trace.info("step0.params_before.conv.weight").dtype == "F64"
    assert ref.trace.info("step1.inputs.x").dtype == "F64" and ref.trace.info("step1.inputs.ids").dtype == "I64"
    assert ref.trace.info("step0.buffers.bn.num_batches_tracked").dtype == "I64"
    assert np.array_equal(ref.trace.values("step2.inputs.x"), batches[2]["x"].double().numpy())
    assert np.array_equal(ref.trace.values("step0.params_before.head.weight"),
                          trace.values("step0.params_before.head.weight").astype(np.float64))
    # float64 runs the same passes: the float32 outputs are within float32's rounding of it, and not equal
    got, exact = trace.values("step2.outputs.logits"), ref.trace.values("step2.outputs.logits")
    assert 0 < np.abs(got - exact).max() < 1e-5
    assert ref.trace.metadata["outputs"] == trace.metadata["outputs"] == ["logits", "state.0"]
    assert next(p for _, p in model.named_parameters()).dtype == torch.float32  # the model itself untouched
    assert told == [(0, 3, "float64 reference"), (1, 3, "float64 reference"), (2, 3, "float64 reference"),
                    (3, 3, "float64 reference"), (0, 3, None), (1, 3, None), (2, 3, None), (3, 3, None)]

    alone = open_trace(record_forward_reference(model, batches, tmp_path / "alone.safetensors",
                                                forward=lambda m, b: m(b["x"])))
    for name in alone.names:
        assert np.array_equal(alone.values(name), ref.trace.values(name)), name


def test_the_trace_and_its_reference_cannot_share_a_file(tmp_path: Path) -> None:
    with pytest.raises(BurnsideError, match="the same file"):
        record_forward(_model(), _batches(), tmp_path / "t.safetensors", reference=tmp_path / "." / "t.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_the_init_file_leaves_out_a_buffer_outside_the_state_dict(tmp_path: Path) -> None:
    """A causal mask registered with persistent=False is in the forward trace (the model holds it) but not in the
    state_dict, so not in the checkpoint a port loads: the init file made from the trace leaves it out, or a
    port loading that file (`init.load_module`) is refused for a tensor no burn parameter takes. A persistent
    buffer (BatchNorm's running statistics) stays in."""
    from burnside.burn.port import init_from_trace

    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(4)
            self.fc = nn.Linear(4, 4)
            self.register_buffer("mask", torch.tril(torch.ones(4, 4)), persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.bn(x)) @ self.mask

    torch.manual_seed(0)
    model = Masked()
    trace = open_trace(record_forward(model, {"x": torch.randn(3, 4)}, tmp_path / "t.safetensors"))
    assert "step0.buffers.mask" in trace.names and trace.metadata["buffers_nonpersistent"] == ["mask"]
    init = open_trace(init_from_trace(trace, tmp_path / "init.safetensors"), kind="init")
    buffers = sorted(n.removeprefix("buffers.") for n in init.names if n.startswith("buffers."))
    assert buffers == sorted(model.state_dict().keys() - dict(model.named_parameters()).keys()), buffers
    assert "mask" not in init.metadata["buffers"] and "bn.running_mean" in init.metadata["buffers"]


@pytest.mark.parametrize(("dtype", "name"), [(torch.bfloat16, "BF16"), (torch.float16, "F16")], ids=["bf16", "f16"])
def test_a_half_model_is_recorded_forward_in_its_own_dtype(tmp_path, dtype, name):
    """Parameters, activations and outputs of a bfloat16 / float16 model in its dtype, word for word; an integer
    input stays int64; the float64 reference starts from the exact widening of the half weights and inputs."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Embedding(10, 6), nn.Linear(6, 4), nn.GELU()).to(dtype)
    ids = torch.tensor([[1, 7, 3]])
    path = record_forward(model, {"ids": ids}, tmp_path / "f.safetensors", reference=tmp_path / "r.safetensors")
    trace = open_trace(path)
    assert trace.metadata["dtype"] == str(dtype).removeprefix("torch.")
    assert trace.info("step0.inputs.ids").dtype == "I64"
    for key in ("step0.params_before.0.weight", "step0.params_before.1.bias", "step0.activations.1",
                "step0.activations.2", "step0.outputs.output"):
        assert trace.info(key).dtype == name, key
    words = np.ascontiguousarray(trace.array("step0.params_before.1.weight")).view(np.int16)
    assert words.tolist() == model[1].weight.detach().view(torch.int16).tolist()
    with torch.no_grad():
        out = model(ids)
    assert np.ascontiguousarray(trace.array("step0.outputs.output")).view(np.int16).tolist() == \
        out.view(torch.int16).tolist()
    reference = open_trace(tmp_path / "r.safetensors")
    assert reference.info("step0.params_before.1.weight").dtype == "F64"
    assert reference.values("step0.params_before.1.weight").tolist() == model[1].weight.detach().double().tolist()

"""Odd PyTorch models (issue 23, item 6): each is recorded correctly or refused in one line, before anything
is written or trained, by `record`, `record(..., reference=...)`, `record_reference` and `export_init` alike.

Real PyTorch throughout. No CLI command records a user's model (`burnside run` records its own targets),
so the contract for these refusals is the BurnsideError a recorder script sees.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from burnside.errors import BurnsideError
from burnside.recording.reference import record_reference
from burnside.torch import export_init, record
from burnside.trace import open_trace

RECORDERS = ("record", "record+reference", "record_reference", "export_init")


def _batch() -> dict[str, torch.Tensor]:
    torch.manual_seed(3)
    return {"x": torch.randn(6, 3), "y": torch.tensor([0, 1, 2, 0, 1, 2])}


def _call(how: str, model: nn.Module, tmp_path, **loop):
    """Record ``model`` as ``how`` says, into ``tmp_path`` (an SGD with momentum on its parameters, or on a
    stand-in parameter when it has none: torch refuses an empty optimizer)."""
    params = list(model.parameters()) or [nn.Parameter(torch.zeros(1))]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    batch = _batch()
    if how == "record":
        return record(model, opt, batch, tmp_path / "t.safetensors", steps=2, **loop)
    if how == "record+reference":
        return record(model, opt, batch, tmp_path / "t.safetensors", steps=2, reference=tmp_path / "r.safetensors",
                      **loop)
    if how == "record_reference":
        return record_reference(model, opt, batch, tmp_path / "r.safetensors", steps=2, **loop)
    assert not loop
    return export_init(model, batch, tmp_path / "init.safetensors")


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()}


def _assert_refused(how: str, model: nn.Module, tmp_path, message: str, **loop) -> None:
    """``how`` refuses ``model`` with exactly ``message`` (one line), writes nothing and trains nothing."""
    before = None if any(t.is_meta for t in model.state_dict().values()) else _state(model)
    with pytest.raises(BurnsideError) as caught:
        _call(how, model, tmp_path, **loop)
    assert str(caught.value) == message
    assert "\n" not in message
    assert list(tmp_path.iterdir()) == []
    if before is not None:
        after = _state(model)
        assert after.keys() == before.keys()
        for name, value in before.items():
            assert after[name].dtype == value.dtype and torch.equal(after[name], value), name


# --- no parameters -------------------------------------------------------------------------------------------

NO_PARAMS = ("the model (Sequential) has no parameters: a trace records a training loop's parameters, gradients "
             "and optimizer state, so there is nothing to record; record a model with at least one nn.Parameter")


@pytest.mark.parametrize("how", RECORDERS)
def test_a_model_without_parameters_is_refused(how, tmp_path):
    _assert_refused(how, nn.Sequential(nn.ReLU(), nn.Softmax(dim=1)), tmp_path, NO_PARAMS)


@pytest.mark.parametrize("how", RECORDERS[:3])
def test_a_model_whose_parameters_are_all_frozen_is_refused_by_the_loops(how, tmp_path):
    model = nn.Linear(3, 3).requires_grad_(False)
    _assert_refused(how, model, tmp_path, "none of the model's 2 parameter(s) requires grad, so no step trains "
                                          "anything: set requires_grad=True on the ones the loop trains")


# --- tied parameters -----------------------------------------------------------------------------------------

class Tied(nn.Module):
    """A language-model-like head tied to its embedding: `lm_head.weight = wte.weight`."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.wte = nn.Linear(3, 3, bias=False)
        self.mid = nn.Linear(3, 3)
        self.lm_head = nn.Linear(3, 3, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(torch.tanh(self.mid(self.wte(x))))


def _bits(a) -> bytes:
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    return a.dtype.str.encode() + a.tobytes()


def test_a_tied_parameter_is_recorded_once_under_its_first_name(tmp_path):
    model, batch = Tied(), _batch()
    start = _state(model)
    # the same loop by hand, on a copy: the trace's values must be its values, bit for bit
    twin = copy.deepcopy(model)
    twin_opt = torch.optim.Adam(twin.parameters(), lr=0.1)
    expected = []
    for _ in range(2):
        twin_opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(twin(batch["x"]), batch["y"])
        loss.backward()
        grad = twin.wte.weight.grad.clone()
        twin_opt.step()
        expected.append((loss.detach().clone(), grad, twin.wte.weight.detach().clone()))

    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    path = record(model, opt, batch, tmp_path / "t.safetensors", steps=2, reference=tmp_path / "r.safetensors")
    trace = open_trace(path)
    assert trace.params == ["wte.weight", "mid.weight", "mid.bias"]
    assert trace.metadata["tied"] == {"lm_head.weight": "wte.weight"}
    assert trace.metadata["grads_len"] == [3, 3]
    assert not any("lm_head.weight" in n for n in trace.names)
    assert _bits(trace.values("step0.params_before.wte.weight")) == _bits(start["wte.weight"])
    for k, (loss, grad, after) in enumerate(expected):
        assert _bits(trace.values(f"step{k}.loss")) == _bits(loss)
        assert _bits(trace.values(f"step{k}.grads.wte.weight")) == _bits(grad)  # both uses' sum, once
        assert _bits(trace.values(f"step{k}.params_after.wte.weight")) == _bits(after)
    for name in ("r.safetensors", "r.burn-adam.safetensors"):
        reference = open_trace(tmp_path / name)
        assert reference.params == ["wte.weight", "mid.weight", "mid.bias"]
        assert reference.metadata["tied"] == {"lm_head.weight": "wte.weight"}
        assert reference.metadata["dtype"] == "float64"

    init = open_trace(export_init(Tied(), batch, tmp_path / "init.safetensors"), kind="init")
    assert init.metadata["params"] == ["wte.weight", "mid.weight", "mid.bias"]
    assert init.metadata["tied"] == {"lm_head.weight": "wte.weight"}
    assert "params.lm_head.weight" not in init.names
    assert _bits(init.values("params.wte.weight")) == _bits(start["wte.weight"])


def test_an_untied_model_has_no_tied_key(tmp_path):
    model = nn.Linear(3, 3)
    trace = open_trace(_call("record", model, tmp_path))
    assert "tied" not in trace.metadata
    assert "tied" not in open_trace(export_init(model, _batch(), tmp_path / "i.safetensors"), kind="init").metadata


# --- the meta device -----------------------------------------------------------------------------------------

META = ("parameter 'weight' is on the meta device (a shape without values), so there is nothing to record: "
        "materialise the model first, e.g. model.to_empty(device='cpu') and then load_state_dict(...) or "
        "initialise its weights")


@pytest.mark.parametrize("how", RECORDERS)
def test_a_meta_device_parameter_is_refused(how, tmp_path):
    _assert_refused(how, nn.Linear(3, 3, device="meta"), tmp_path, META)


@pytest.mark.parametrize("how", RECORDERS)
def test_a_meta_device_buffer_is_refused(how, tmp_path):
    model = nn.Linear(3, 3)
    model.register_buffer("scale", torch.ones(3, device="meta"))
    message = META.replace("parameter 'weight'", "buffer 'scale'")
    _assert_refused(how, model, tmp_path, message)


# --- integer parameters and buffers --------------------------------------------------------------------------

class Counted(nn.Module):
    """A Linear with an int64 nn.Parameter (requires_grad=False) and an int32 buffer, neither trained."""

    def __init__(self) -> None:
        super().__init__()
        self.ids = nn.Parameter(torch.tensor([7, -3, 2**40], dtype=torch.int64), requires_grad=False)
        torch.manual_seed(6)
        self.fc = nn.Linear(3, 3)
        self.register_buffer("seen", torch.tensor([1, 2], dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def test_integer_parameters_and_buffers_are_recorded_as_integers(tmp_path):
    model, batch = Counted(), _batch()
    ids = model.ids.detach().clone()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    trace = open_trace(record(model, opt, batch, tmp_path / "t.safetensors", steps=2,
                              reference=tmp_path / "r.safetensors"))
    assert trace.params == ["ids", "fc.weight", "fc.bias"]
    assert trace.metadata["dtype"] == "float32"  # the model's, not the integer parameter's
    assert trace.metadata["grads_len"] == [2, 2]
    for k in range(2):
        for stage in ("params_before", "params_after"):
            assert trace.info(f"step{k}.{stage}.ids").dtype == "I64"
            assert _bits(trace.values(f"step{k}.{stage}.ids")) == _bits(ids)
        assert trace.info(f"step{k}.buffers.seen").dtype == "I32"
        assert trace.values(f"step{k}.buffers.seen").tolist() == [1, 2]
        assert f"step{k}.grads.ids" not in trace.names
    reference = open_trace(tmp_path / "r.safetensors")
    assert reference.metadata["dtype"] == "float64"
    assert reference.info("step1.params_after.ids").dtype == "I64"
    assert _bits(reference.values("step1.params_after.ids")) == _bits(ids)

    init = open_trace(export_init(Counted(), batch, tmp_path / "init.safetensors"), kind="init")
    assert init.info("params.ids").dtype == "I64"  # not widened to f32 (2**40 + 1 would not survive)
    assert _bits(init.values("params.ids")) == _bits(ids)
    assert init.info("params.fc.weight").dtype == "F32"
    assert init.info("buffers.seen").dtype == "I64"


# --- bfloat16 and float16 ----------------------------------------------------------------------------------

HALF = {torch.bfloat16: "BF16", torch.float16: "F16"}


def _words(t: torch.Tensor) -> list[int]:
    """A half tensor's raw 16-bit words."""
    return t.detach().contiguous().view(torch.int16).flatten().tolist()


def _trace_words(array: np.ndarray) -> list[int]:
    return np.ascontiguousarray(array).view(np.int16).flatten().tolist()


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("how", RECORDERS)
def test_a_half_model_is_recorded_in_its_own_dtype(how, dtype, tmp_path):
    """A bfloat16 or float16 model (and its buffer) is recorded as it is, word for word: its parameters, grads,
    logits and optimizer state in its dtype, the init file's weights too; its float64 reference starts from the
    exact widening of the half weights; integer labels stay int64."""
    torch.manual_seed(11)
    model = nn.Linear(3, 3)
    model.register_buffer("scale", torch.tensor([0.5, -0.0, 3.0]))
    model.to(dtype)
    start = _state(model)
    batch = {"x": _batch()["x"].to(dtype), "y": _batch()["y"]}
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    name = HALF[dtype]
    if how == "export_init":
        init = open_trace(export_init(model, batch, tmp_path / "init.safetensors"), kind="init")
        for key in ("weight", "bias"):
            assert init.info(f"params.{key}").dtype == name
            assert _trace_words(init.array(f"params.{key}")) == _words(start[key])
        assert init.info("buffers.scale").dtype == name
        assert init.info("inputs.x").dtype == name and init.info("inputs.y").dtype == "I64"
        assert _trace_words(init.array("inputs.x")) == _words(batch["x"])
        return
    if how == "record_reference":
        reference = open_trace(record_reference(model, opt, batch, tmp_path / "r.safetensors", steps=2))
    else:
        kwargs = {"reference": tmp_path / "r.safetensors"} if how == "record+reference" else {}
        trace = open_trace(record(model, opt, batch, tmp_path / "t.safetensors", steps=2, **kwargs))
        assert trace.metadata["dtype"] == str(dtype).removeprefix("torch.")
        for key in ("weight", "bias"):
            assert trace.info(f"step0.params_before.{key}").dtype == name
            assert _trace_words(trace.array(f"step0.params_before.{key}")) == _words(start[key])
            assert _trace_words(trace.array(f"step1.params_after.{key}")) == _words(model.state_dict()[key])
            for stage in ("grads", "optim.momentum_buffer"):
                assert trace.info(f"step1.{stage}.{key}").dtype == name
        assert trace.info("step0.logits").dtype == name and trace.info("step0.inputs.y").dtype == "I64"
        assert trace.info("step0.buffers.scale").dtype == name
        assert trace.info("step0.loss").dtype == name
        if how == "record":
            return
        reference = open_trace(tmp_path / "r.safetensors")
    assert reference.metadata["dtype"] == "float64"
    for key in ("weight", "bias", "scale"):
        stage = "buffers" if key == "scale" else "params_before"
        widened = start[key].double().numpy()
        assert reference.values(f"step0.{stage}.{key}").tolist() == widened.tolist()
    assert reference.values("step0.inputs.x").tolist() == batch["x"].double().tolist()


def test_a_tensor_of_a_dtype_no_trace_holds_is_refused_in_one_line(tmp_path):
    """float8 has no safetensors dtype a trace reads: the recorder says so and what to do."""
    model = nn.Linear(3, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(BurnsideError) as caught:
        record(model, opt, _batch(), tmp_path / "t.safetensors", steps=1,
               forward=lambda m, b: m(b["x"]).to(torch.float8_e4m3fn),
               loss_fn=lambda logits, y: F.cross_entropy(logits.float(), y))
    assert str(caught.value) == FLOAT8
    assert list(tmp_path.iterdir()) == []


FLOAT8 = ("a torch.float8_e4m3fn tensor cannot be recorded: a trace holds float64, float32, float16, bfloat16, "
          "integer and bool tensors; convert it, e.g. .float()")


# --- a forward that returns a dict or a tuple ----------------------------------------------------------------

class Normed(nn.Module):
    """A BatchNorm net (its forward pass moves the running statistics) whose output is ``wrap(logits, x)``."""

    def __init__(self, wrap) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.bn = nn.BatchNorm1d(3)
        self.fc = nn.Linear(3, 3)
        self.wrap = wrap

    def forward(self, x: torch.Tensor):
        return self.wrap(self.fc(self.bn(x)), x)


DICT = ("the model's forward returned a dict ('logits': Tensor [6, 3], 'hidden': Tensor [6, 3]), not the logits "
        'tensor: pass forward=lambda m, b: m(b["x"])["logits"] (the logits)')
TUPLE = ("the model's forward returned a tuple of 2 (Tensor [6, 3], Tensor [6, 3]), not the logits tensor: "
         'pass forward=lambda m, b: m(b["x"])[0] (the logits)')


@pytest.mark.parametrize("how", RECORDERS[:3])
def test_a_forward_returning_a_dict_is_refused_with_the_forward_to_pass(how, tmp_path):
    _assert_refused(how, Normed(lambda logits, x: {"logits": logits, "hidden": x}), tmp_path, DICT)


@pytest.mark.parametrize("how", RECORDERS[:3])
def test_a_forward_returning_a_tuple_is_refused_with_the_forward_to_pass(how, tmp_path):
    _assert_refused(how, Normed(lambda logits, x: (logits, x)), tmp_path, TUPLE)


def test_a_custom_forward_returning_a_tuple_is_refused(tmp_path):
    message = ("forward(model, batch) returned a tuple of 2 (Tensor [6, 3], Tensor [6, 3]), not the logits tensor: "
               "make it return the logits, e.g. its [0]")
    _assert_refused("record", Normed(lambda logits, x: (logits, x)), tmp_path, message,
                    forward=lambda m, b: m(b["x"]))


def test_the_forward_the_refusal_names_records_the_dict_model(tmp_path):
    wrapped = Normed(lambda logits, x: {"logits": logits, "hidden": x})
    plain = Normed(lambda logits, x: logits)
    forward = lambda m, b: m(b["x"])["logits"]  # noqa: E731 - what the refusal tells the user to pass
    a = open_trace(record(wrapped, torch.optim.SGD(wrapped.parameters(), lr=0.1), _batch(), tmp_path / "a.safetensors",
                          steps=2, forward=forward, reference=tmp_path / "ra.safetensors"))
    b = open_trace(record(plain, torch.optim.SGD(plain.parameters(), lr=0.1), _batch(), tmp_path / "b.safetensors",
                          steps=2))
    assert a.names == b.names
    for name in a.names:
        assert _bits(a.values(name)) == _bits(b.values(name)), name


# --- a loss that is not a scalar -----------------------------------------------------------------------------

NOT_SCALAR = ('the loss has shape [6], not a scalar (loss_fn {name} gives a loss per element, as reduction="none" '
              'does): reduce it to one number, with reduction="mean" or loss_fn=lambda logits, y: '
              'your_loss(logits, y).mean()')


@pytest.mark.parametrize("how", RECORDERS[:3])
def test_a_loss_per_element_is_refused(how, tmp_path):
    model = Normed(lambda logits, x: logits)
    _assert_refused(how, model, tmp_path, NOT_SCALAR.format(name="CrossEntropyLoss"),
                    loss_fn=nn.CrossEntropyLoss(reduction="none"))


def test_a_functional_loss_per_element_is_refused(tmp_path):
    _assert_refused("record", Normed(lambda logits, x: logits), tmp_path, NOT_SCALAR.format(name="<lambda>"),
                    loss_fn=lambda logits, y: F.cross_entropy(logits, y, reduction="none"))


def test_tied_survives_the_json_form_and_a_malformed_tied_is_refused(tmp_path):
    from burnside.errors import TraceError
    from burnside.trace import convert_trace, write_trace

    model = Tied()
    path = record(model, torch.optim.SGD(model.parameters(), lr=0.1), _batch(), tmp_path / "t.safetensors")
    converted = open_trace(convert_trace(path, tmp_path / "t.json"))
    assert converted.metadata["tied"] == {"lm_head.weight": "wte.weight"}
    trace = open_trace(path)
    tensors = {name: trace.array(name) for name in trace.names}
    with pytest.raises(TraceError, match="metadata 'tied' must map parameter names to the name each shares"):
        write_trace(tmp_path / "bad.safetensors", tensors, {**trace.metadata, "tied": ["lm_head.weight"]})
    assert not (tmp_path / "bad.safetensors").exists()


@pytest.mark.parametrize("with_reference", [False, True])
def test_a_batch_without_x_for_the_default_forward_is_one_line(tmp_path, with_reference):
    model = torch.nn.Linear(3, 2)
    batch = {"inp": torch.randn(4, 3), "y": torch.randint(0, 2, (4,))}
    reference = tmp_path / "r.safetensors" if with_reference else None
    with pytest.raises(BurnsideError, match=r"^the batch has no input 'x' \(it has 'inp', 'y'\).*pass forward="):
        record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, tmp_path / "t.safetensors",
               reference=reference)
    assert list(tmp_path.iterdir()) == []

"""Every metadata value is type-checked, in both forms and before writing, with a message naming the key."""

from __future__ import annotations

import json

import numpy as np
import pytest

from burnside.errors import TraceError
from burnside.trace import open_trace, write_trace
from burnside.trace.metadata import encode

from .conftest import join, split, tiny_metadata, tiny_tensors

ADAM = {"name": "adam", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0,
        "weight_decay_kind": "l2", "amsgrad": False}

# (key, bad value, what the message says): issue 11's crashing values first.
BAD = [
    ("steps", "3", "'steps' must be an integer from 1 to 100000, not '3'"),
    ("steps", None, "'steps' must be an integer from 1 to 100000, not None"),
    ("steps", 1e300, "'steps' must be an integer from 1 to 100000, not 1e\\+300"),
    ("steps", 10**6, "'steps' must be an integer from 1 to 100000, not 1000000"),
    ("steps", 0, "'steps' must be an integer"),
    ("steps", True, "'steps' must be an integer"),
    ("params", 5, "'params' must be a list of names, not 5"),
    ("params", [[1]], "every entry of metadata 'params' must be a string, not \\[1\\]"),
    ("params", ["w", "w"], "'params' lists 'w' twice"),
    ("grads_len", ["4"], "'grads_len' must be a list of non-negative integers"),
    ("grads_len", [-1], "'grads_len' must be a list of non-negative integers"),
    ("grads_len", [4, 4], "'grads_len' has 2 entries for 1 steps"),
    ("optimizer", [1], "'optimizer' must be an object"),
    ("optimizer", {"lr": 0.1}, "'optimizer' has no \"name\""),
    ("optimizer", ADAM | {"lr": [0.1]}, "optimizer.lr must be a finite number, not \\[0.1\\]"),
    ("optimizer", ADAM | {"eps": "1e-8"}, "optimizer.eps must be a finite number, not '1e-8'"),
    ("optimizer", ADAM | {"eps": 2 * 10**308}, "optimizer.eps must be a finite number"),
    ("optimizer", ADAM | {"betas": [0.9]}, "optimizer.betas must be a list of two numbers"),
    ("optimizer", ADAM | {"amsgrad": 0}, "optimizer.amsgrad must be true or false"),
    ("optimizer", ADAM | {"weight_decay_kind": "L2"}, "optimizer.weight_decay_kind must be \"l2\" or \"decoupled\""),
    ("optimizer", ADAM | {"name": 3}, "optimizer.name must be a string"),
    ("optimizer", ADAM | {"foreach": [1]}, "optimizer.foreach must be a string, number, true/false or null"),
    ("framework", 5, "metadata 'framework' must be a string, not 5"),
    ("framework_version", "2.0\x1b[2J", "metadata 'framework_version' contains the control character U\\+001B"),
    ("device", ["cpu"], "metadata 'device' must be a string"),
]


@pytest.mark.parametrize(("key", "value", "message"), BAD)
def test_json_form_names_the_key(tmp_path, key, value, message):
    doc = {"format": "burnside-trace", "version": 1, "metadata": tiny_metadata(**{key: value}),
           "tensors": {"step0.loss": {"dtype": "F32", "shape": [], "data": [1.5]}}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=message):
        open_trace(path)


@pytest.mark.parametrize(("key", "value", "message"), BAD)
def test_safetensors_form_names_the_key(tmp_path, key, value, message):
    path = write_trace(tmp_path / "t.safetensors", tiny_tensors(), tiny_metadata())
    n, header, body = split(path)
    header["__metadata__"] = encode(tiny_metadata(**{key: value}), "trace")
    path.write_bytes(join(header, body))
    if not isinstance(header["__metadata__"][key], str):  # a plain key's value is a JSON string here
        message = "__metadata__ must map strings to strings"
    with pytest.raises(TraceError, match=message):
        open_trace(path)


@pytest.mark.parametrize(("key", "value", "message"), [b for b in BAD if b[0] != "steps" or b[1] != 1e300])
def test_the_writer_refuses_what_the_reader_would_and_writes_nothing(tmp_path, key, value, message):
    for name in ("t.safetensors", "t.json"):
        with pytest.raises(TraceError, match=message):
            write_trace(tmp_path / name, tiny_tensors(), tiny_metadata(**{key: value}))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["t.json", "t.safetensors"])
def test_steps_must_match_the_steps_the_tensors_cover(tmp_path, name):
    with pytest.raises(TraceError, match="'steps' is 2 but the tensors cover 1 step \\(step0 to step0\\)"):
        write_trace(tmp_path / name, tiny_tensors(), tiny_metadata(steps=2, grads_len=[0, 0]))
    tensors = tiny_tensors() | {"step2.loss": np.array(1.0, np.float32)}
    with pytest.raises(TraceError, match="'steps' is 1 but the tensors cover 3 steps \\(step0 to step2\\)"):
        write_trace(tmp_path / name, tensors, tiny_metadata())


def test_the_writer_refuses_a_nan_learning_rate_that_json_cannot_hold(tmp_path):
    with pytest.raises(TraceError, match="optimizer.lr must be a finite number, not nan"):
        write_trace(tmp_path / "t.json", tiny_tensors(), tiny_metadata(optimizer={"name": "sgd", "lr": float("nan")}))


def test_an_old_trace_without_the_required_keys_says_to_re_record(tmp_path):
    meta = tiny_metadata()
    del meta["grads_len"], meta["device"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "burnside-trace", "version": 1, "metadata": meta,
                                "tensors": {"step0.loss": {"dtype": "F32", "shape": [], "data": [1.5]}}}))
    with pytest.raises(TraceError, match="metadata lacks the required keys device, grads_len; a trace file recorded "
                                         "before burnside required them must be re-recorded"):
        open_trace(path)


def test_a_step_index_beyond_the_bound_is_refused_before_anything_loops(tmp_path):
    tensors = tiny_tensors() | {f"step{10**400}.loss": np.array(1.0, np.float32)}
    path = tmp_path / "t.safetensors"
    with pytest.raises(TraceError, match="is beyond the 100000 steps a trace may hold"):
        write_trace(path, tensors, tiny_metadata())
    good = write_trace(path, tiny_tensors(), tiny_metadata())
    n, header, body = split(good)
    header[f"step{10**400}.loss"] = header.pop("step0.loss")
    path.write_bytes(join(header, body))
    with pytest.raises(TraceError, match="is beyond the 100000 steps a trace may hold"):
        open_trace(path)


def test_tensor_names_with_control_characters_are_refused(tmp_path):
    with pytest.raises(TraceError, match="a tensor name contains the control character U\\+001B"):
        write_trace(tmp_path / "t.json", tiny_tensors() | {"step0.\x1b[31mred": np.zeros(1, np.float32)},
                    tiny_metadata())


def test_the_json_form_may_not_set_the_safetensors_format_keys(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"format": "burnside-trace", "version": 1,
                                "metadata": tiny_metadata() | {"burnside.format": "init"},
                                "tensors": {"step0.loss": {"dtype": "F32", "shape": [], "data": [1.5]}}}))
    with pytest.raises(TraceError, match="metadata 'burnside.format' is the writer's to set"):
        open_trace(path)


def test_an_unknown_optimizer_recorded_by_pytorch_reads(tmp_path):
    torch = pytest.importorskip("torch")
    from burnside.torch import record

    model = torch.nn.Linear(4, 3)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
    batch = {"x": torch.ones(2, 4), "y": torch.tensor([0, 2])}
    trace = open_trace(record(model, opt, batch, tmp_path / "rms.json", steps=2))
    assert trace.optimizer["name"] == "rmsprop" and trace.optimizer["alpha"] == 0.99
    assert trace.steps == 2

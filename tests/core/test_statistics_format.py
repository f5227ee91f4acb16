"""Format version 3: tensors recorded as statistics only, written and read back in both forms, kept by convert."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from burnside.errors import TraceError
from burnside.trace import convert_trace, open_trace, statistics_of, write_trace
from burnside.trace.stream import open_writer
from tests.core.conftest import a1_like_tensors, base_metadata

STATS_NAMES = ("step0.grads.fc1.weight", "step0.logits")


def _split(tensors):
    full = dict(tensors)
    stats = {name: statistics_of(full.pop(name), "F32") for name in STATS_NAMES}
    return full, stats


def _header(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])["__metadata__"]


@pytest.mark.parametrize("suffix", [".safetensors", ".json"])
def test_statistics_round_trip_through_a_writer(tmp_path, suffix):
    tensors = a1_like_tensors()
    full, stats = _split(tensors)
    path = tmp_path / f"t{suffix}"
    with open_writer(path, expected_tensors=len(full)) as writer:
        for name, array in full.items():
            writer.add(name, array)
        for name, s in stats.items():
            writer.add_statistics(name, s)
        writer.finish(base_metadata() | {"full_steps": [], "layer_statistics": True})
    trace = open_trace(path)
    assert trace.statistics == stats
    assert list(trace.statistics) == ["step0.logits", "step0.grads.fc1.weight"]  # pipeline order
    assert set(trace.names) == set(full) and not any(name in trace for name in stats)
    assert trace.metadata["full_steps"] == [] and trace.metadata["layer_statistics"] is True
    assert "statistics" not in trace.metadata
    # a full tensor's statistics are computed from its data, the same as the recorder's
    assert trace.statistics_of("step0.grads.fc2.weight") == statistics_of(tensors["step0.grads.fc2.weight"], "F32")
    assert trace.statistics_of("step0.logits") is trace.statistics["step0.logits"]
    with pytest.raises(KeyError):
        trace.statistics_of("step0.nothing")
    if suffix == ".json":
        assert json.loads(path.read_text())["version"] == 3
    else:
        assert _header(path)["burnside.version"] == "3"


def test_statistics_with_aliases_are_version_3(tmp_path):
    full, stats = _split(a1_like_tensors())
    path = tmp_path / "t.safetensors"
    with open_writer(path) as writer:
        for name, array in full.items():
            if name != "step0.params_after.fc2.bias":
                writer.add(name, array)
        writer.alias("step0.params_after.fc2.bias", "step0.params_before.fc2.bias")
        for name, s in stats.items():
            writer.add_statistics(name, s)
        writer.finish(base_metadata())
    meta = _header(path)
    assert meta["burnside.version"] == "3" and "aliases" in meta and "statistics" in meta
    trace = open_trace(path)
    assert trace.aliases and trace.statistics == stats


def test_a_trace_without_statistics_is_written_as_before(tmp_path):
    path = write_trace(tmp_path / "t.safetensors", a1_like_tensors(), base_metadata(), statistics={})
    assert _header(path)["burnside.version"] == "1" and "statistics" not in _header(path)
    json_path = write_trace(tmp_path / "t.json", a1_like_tensors(), base_metadata())
    assert json.loads(json_path.read_text())["version"] == 1
    assert open_trace(path).statistics == {}


@pytest.mark.parametrize(("src", "dst"), [(".safetensors", ".json"), (".json", ".safetensors")])
def test_convert_keeps_statistics_both_ways(tmp_path, src, dst):
    tensors = a1_like_tensors()
    full, stats = _split(tensors)
    nonfinite = np.array([1.0, np.nan, np.inf], np.float32)
    stats["step0.grads.fc2.bias"] = statistics_of(nonfinite, "F32")  # non-finite numbers as strings
    full.pop("step0.grads.fc2.bias")
    a = write_trace(tmp_path / f"a{src}", full, base_metadata() | {"full_steps": [0]}, statistics=stats)
    b = convert_trace(a, tmp_path / f"b{dst}")
    back = convert_trace(b, tmp_path / f"c{src}")
    for path in (b, back):
        trace = open_trace(path)
        # to_json: NaN is the string "nan" there, equal to itself
        assert {n: s.to_json() for n, s in trace.statistics.items()} == {n: s.to_json() for n, s in stats.items()}
        assert trace.metadata["full_steps"] == [0]
        for name in full:
            assert np.array_equal(trace.array(name), full[name])
    assert open_trace(b).statistics["step0.grads.fc2.bias"].nonfinite == 2


@pytest.mark.parametrize(("name", "array", "why"), [
    ("step0.inputs.x", np.ones((4, 2), np.float32), "an input is never statistics"),
    ("step0.params_before.fc1.weight", np.ones((2, 2), np.float32), "step0.params_before is never statistics"),
    ("step0.loss", np.float32(1.0).reshape(()), "a 0-d scalar is never statistics"),
    ("step0.grads.fc1.weight", np.ones((2, 2), np.int64), "an I64 tensor is never statistics"),
])
@pytest.mark.parametrize("suffix", [".safetensors", ".json"])
def test_a_writer_refuses_what_a_reader_would(tmp_path, name, array, why, suffix):
    dtype = "I64" if array.dtype == np.int64 else "F32"
    with open_writer(tmp_path / f"t{suffix}") as writer, pytest.raises(TraceError, match=why):
        writer.add_statistics(name, statistics_of(array, dtype))


def test_a_name_is_recorded_once_in_full_or_as_statistics(tmp_path):
    grads = a1_like_tensors()["step0.grads.fc1.weight"]
    with open_writer(tmp_path / "t.safetensors") as writer:
        writer.add("step0.grads.fc1.weight", grads)
        with pytest.raises(TraceError, match="recorded twice"):
            writer.add_statistics("step0.grads.fc1.weight", statistics_of(grads, "F32"))
        writer.add_statistics("step0.logits", statistics_of(np.ones((4, 3), np.float32), "F32"))
        with pytest.raises(TraceError, match="recorded twice"):
            writer.add("step0.logits", np.ones((4, 3), np.float32))
    with pytest.raises(TraceError, match="recorded twice"):
        write_trace(tmp_path / "u.safetensors", {"step0.logits": np.ones((4, 3), np.float32)}, base_metadata(),
                    statistics={"step0.logits": statistics_of(np.ones((4, 3), np.float32), "F32")})


@pytest.mark.parametrize("suffix", [".safetensors", ".json"])
def test_metadata_statistics_from_a_caller_is_refused(tmp_path, suffix):
    """The writer sets metadata `statistics`, as it sets `aliases`."""
    with pytest.raises(TraceError, match="metadata 'statistics' is the writer's to set"):
        write_trace(tmp_path / f"t{suffix}", a1_like_tensors(), base_metadata() | {"statistics": {}})


@pytest.mark.parametrize(("value", "message"), [
    ([1, 0], "metadata 'full_steps' must be a list of step indices"),
    ([0, 0], "metadata 'full_steps' must be a list of step indices"),
    ([-1], "metadata 'full_steps' must be a list of step indices"),
    ([True], "metadata 'full_steps' must be a list of step indices"),
    ("0", "metadata 'full_steps' must be a list of step indices"),
    ([3], "metadata 'full_steps' names step 3 of a trace of 1 steps"),
])
def test_metadata_full_steps_is_checked(tmp_path, value, message):
    with pytest.raises(TraceError, match=message):
        write_trace(tmp_path / "t.safetensors", a1_like_tensors(), base_metadata() | {"full_steps": value})


def test_metadata_layer_statistics_is_a_boolean(tmp_path):
    with pytest.raises(TraceError, match="metadata 'layer_statistics' must be true or false"):
        write_trace(tmp_path / "t.safetensors", a1_like_tensors(), base_metadata() | {"layer_statistics": "yes"})

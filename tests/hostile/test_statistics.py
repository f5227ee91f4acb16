"""Format version 3's statistics: a file whose `statistics` cannot be right is one line, "corrupt trace ...
re-record it", in either form."""

from __future__ import annotations

import json

import numpy as np
import pytest

from burnside.errors import TraceError
from burnside.trace import open_trace, statistics_of, write_trace
from burnside.trace.stream import TraceWriter
from tests.core.conftest import a1_like_tensors, base_metadata

from .conftest import edit_metadata as _edit
from .conftest import join, split

NAME = "step0.grads.fc1.weight"


def _tensors_and_statistics():
    tensors = a1_like_tensors()
    stats = {NAME: statistics_of(tensors.pop(NAME), "F32")}
    return tensors, stats


@pytest.fixture
def v3_path(tmp_path):
    """A valid version-3 safetensors trace: `step0.grads.fc1.weight` as statistics only."""
    tensors, stats = _tensors_and_statistics()
    path = tmp_path / "t.safetensors"
    with TraceWriter(path, expected_tensors=len(tensors)) as writer:
        for name, array in tensors.items():
            writer.add(name, array)
        writer.add_statistics(NAME, stats[NAME])
        writer.finish(base_metadata())
    return path


@pytest.fixture
def v3_json(tmp_path):
    tensors, stats = _tensors_and_statistics()
    return write_trace(tmp_path / "t.json", tensors, base_metadata(), statistics=stats)


def _entry(**changes):
    entry = statistics_of(a1_like_tensors()[NAME], "F32").to_json()
    for key, value in changes.items():
        if value is None:
            entry.pop(key)
        else:
            entry[key] = value
    return entry


def test_the_writers_version_3_file_reads_with_the_statistics_apart(v3_path, v3_json):
    for path in (v3_path, v3_json):
        trace = open_trace(path)
        assert NAME not in trace.names and NAME not in trace
        assert trace.statistics[NAME] == statistics_of(a1_like_tensors()[NAME], "F32")
        assert "statistics" not in trace.metadata
    assert split(v3_path)[1]["__metadata__"]["burnside.version"] == "3"
    assert json.loads(v3_json.read_text())["version"] == 3


BAD = [
    ({"burnside.version": "2"}, "corrupt trace (metadata 'statistics' in a version-2 file: statistics are version 3)"),
    ({"statistics": '{"a": '}, "corrupt trace (metadata 'statistics' is not valid JSON"),
    ({"statistics": json.dumps([NAME])}, "corrupt trace (metadata 'statistics' must map tensor names to statistics"),
    ({"statistics": json.dumps({"step0.logits": _entry(shape=[4, 3])})},
     "corrupt trace (statistics of 'step0.logits', which the file also holds as a tensor or an alias)"),
    ({"statistics": json.dumps({NAME: _entry(xxh3="00")})}, "xxh3 is not 32 lower-case hex digits"),
    ({"statistics": json.dumps({NAME: _entry(mean=None)})}, "expected an object with exactly dtype, shape"),
    ({"statistics": json.dumps({NAME: {**_entry(), "extra": 1}})}, "expected an object with exactly dtype, shape"),
    ({"statistics": json.dumps({NAME: _entry(shape=[2, -1])})}, "shape is not a list of sizes"),
    ({"statistics": json.dumps({NAME: _entry(shape=[1] * 40)})}, "40 dimensions, more than the 32 allowed"),
    ({"statistics": json.dumps({NAME: _entry(shape=[1 << 30, 1 << 30])})}, "is beyond a tensor's bounds"),
    ({"statistics": json.dumps({NAME: _entry(nonfinite=10**6)})}, "nonfinite is not a count of the tensor's"),
    ({"statistics": json.dumps({NAME: _entry(norm="big")})}, "mean, norm and max_abs must be numbers"),
    ({"statistics": json.dumps({NAME: _entry(norm=True)})}, "mean, norm and max_abs must be numbers"),
    ({"statistics": json.dumps({NAME: _entry(norm=-1.0)})}, "norm and max_abs are magnitudes, never negative"),
    ({"statistics": json.dumps({NAME: _entry(max_abs="inf")})}, "max_abs inf with no non-finite value"),
    ({"statistics": json.dumps({NAME: _entry(nonfinite=1)})}, "1 non-finite values, but mean and norm"),
    ({"statistics": json.dumps({NAME: _entry(dtype="Q8")})}, "dtype 'Q8' is no dtype a trace holds"),
    ({"statistics": json.dumps({NAME: _entry(dtype="I64")})}, "an I64 tensor is never statistics"),
    ({"statistics": json.dumps({NAME: _entry(dtype="BOOL")})}, "an BOOL tensor is never statistics"),
    ({"statistics": json.dumps({NAME: _entry(shape=[])})}, "a 0-d scalar is never statistics"),
    ({"statistics": json.dumps({NAME: _entry(), "": _entry()})},
     "corrupt trace (a statistics entry has an empty name)"),
    ({"statistics": json.dumps({NAME: _entry(), "step0.\x1b[31m": _entry()})},
     "a statistics name contains the control character U+001B"),
]


def _one_line(path, message):
    with pytest.raises(TraceError) as info:
        open_trace(path)
    text = str(info.value)
    assert message in text, text
    assert "\n" not in text and str(path) in text


@pytest.mark.parametrize(("edit", "message"), BAD)
def test_a_broken_statistics_entry_is_one_line(v3_path, edit, message):
    _edit(v3_path, **edit)
    _one_line(v3_path, message)


@pytest.mark.parametrize(("edit", "message"), [b for b in BAD if "statistics" in b[0] and "not valid JSON"
                                                 not in b[1]])
def test_the_same_entries_are_refused_in_the_json_form(v3_json, edit, message):
    doc = json.loads(v3_json.read_text())
    doc["metadata"]["statistics"] = json.loads(edit["statistics"])
    v3_json.write_text(json.dumps(doc))
    _one_line(v3_json, message)


@pytest.mark.parametrize(("name", "why"), [
    ("step0.inputs.x", "an input is never statistics"),
    ("step0.params_before.fc1.weight", "step0.params_before is never statistics"),
])
def test_statistics_of_the_start_are_refused(v3_path, name, why):
    """The inputs and step 0's parameters are the start both sides load bit-identically: a file holding only their
    statistics has no start (an init file cannot be made from it)."""
    _, header, body = split(v3_path)
    entry = header.pop(name)
    start, end = entry["data_offsets"]
    body = body[:start] + body[end:]
    for spec in header.values():
        if isinstance(spec, dict) and "data_offsets" in spec and spec["data_offsets"][0] >= end:
            spec["data_offsets"] = [o - (end - start) for o in spec["data_offsets"]]
    stats = json.loads(header["__metadata__"]["statistics"])
    stats[name] = _entry(shape=entry["shape"], dtype=entry["dtype"])
    header["__metadata__"]["statistics"] = json.dumps(stats)
    v3_path.write_bytes(join(header, body))
    _one_line(v3_path, f"corrupt trace (statistics of '{name}': {why}")


def test_statistics_in_a_version_1_json_trace_are_refused(v3_json):
    doc = json.loads(v3_json.read_text())
    doc["version"] = 1
    v3_json.write_text(json.dumps(doc))
    _one_line(v3_json, "corrupt trace (metadata 'statistics' in a version-1 file")


def test_a_json_trace_of_version_2_is_refused(v3_json):
    doc = json.loads(v3_json.read_text())
    doc["version"] = 2
    v3_json.write_text(json.dumps(doc))
    _one_line(v3_json, "trace format version 2 is not supported (this burnside reads JSON versions 1 and 3)")


def test_statistics_in_an_init_file_are_refused(tmp_path):
    path = write_trace(tmp_path / "init.safetensors", {"params.w": np.ones(3, np.float32),
                                                       "inputs.x": np.ones(2, np.float32)},
                       {"params": ["w"], "inputs": ["x"]}, kind="init")
    _edit(path, **{"statistics": json.dumps({"step1.params_after.w": _entry()})})
    with pytest.raises(TraceError, match=r"corrupt trace \(metadata 'statistics' in a version-1 file"):
        open_trace(path, kind="init")  # an init file is always version 1: it holds every tensor in full


def test_a_statistics_only_step_still_counts_as_a_step(tmp_path):
    """`steps` is checked against every name, statistics ones included: a last step held only as statistics is a
    step of the trace, and one beyond `steps` is refused."""
    tensors = a1_like_tensors()
    stats = {"step1.grads.fc1.weight": statistics_of(tensors[NAME], "F32")}
    path = write_trace(tmp_path / "t.safetensors", tensors, base_metadata(steps=2) | {"grads_len": [4, 4]},
                       statistics=stats)
    assert open_trace(path).steps == 2
    with pytest.raises(TraceError, match="metadata 'steps' is 1 but the tensors cover 2 steps"):
        write_trace(tmp_path / "u.safetensors", tensors, base_metadata(), statistics=stats)

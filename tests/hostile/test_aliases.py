"""Format version 2's aliases: a file whose `aliases` cannot be right is one line, "corrupt trace ... re-record it"."""

from __future__ import annotations

import json

import numpy as np
import pytest

from burnside.errors import TraceError
from burnside.trace import open_trace, write_trace
from burnside.trace.stream import TraceWriter
from tests.core.conftest import a1_like_tensors, base_metadata

from .conftest import edit_metadata as _edit
from .conftest import split

ALIAS = "step0.params_after.fc2.bias"
TARGET = "step0.params_before.fc2.bias"


@pytest.fixture
def v2_path(tmp_path):
    """A valid version-2 trace: `step0.params_after.fc2.bias` an alias of `step0.params_before.fc2.bias`."""
    tensors = a1_like_tensors()
    tensors[ALIAS] = tensors[TARGET]
    path = tmp_path / "t.safetensors"
    with TraceWriter(path, expected_tensors=len(tensors)) as writer:
        for name, array in tensors.items():
            if name != ALIAS:
                writer.add(name, array)
        writer.alias(ALIAS, TARGET)
        writer.finish(base_metadata())
    return path


def test_the_writers_version_2_file_reads_with_the_alias_as_its_target(v2_path):
    trace = open_trace(v2_path)
    assert split(v2_path)[1]["__metadata__"]["burnside.version"] == "2"
    assert ALIAS in trace.names and trace.aliases == {ALIAS: TARGET}
    assert np.array_equal(trace.array(ALIAS), trace.array(TARGET))
    assert "aliases" not in trace.metadata


def test_a_file_without_aliases_stays_version_1(tmp_path):
    path = tmp_path / "t.safetensors"
    with TraceWriter(path) as writer:
        for name, array in a1_like_tensors().items():
            writer.add(name, array)
        writer.finish(base_metadata())
    assert split(path)[1]["__metadata__"]["burnside.version"] == "1"
    assert open_trace(path).aliases == {}


@pytest.mark.parametrize(("edit", "message"), [
    ({"burnside.version": "1"}, "corrupt trace (metadata 'aliases' in a version-1 file: aliases are version 2)"),
    ({"aliases": json.dumps({ALIAS: "step0.params_after.nothing"})},
     f"corrupt trace (alias '{ALIAS}' points to 'step0.params_after.nothing', which is not in the file)"),
    ({"aliases": json.dumps({ALIAS: TARGET, "step0.extra": ALIAS})},
     f"corrupt trace (alias 'step0.extra' points to '{ALIAS}', another alias, not a tensor)"),
    ({"aliases": json.dumps({"step0.loss": "step0.logits", ALIAS: TARGET})},
     "corrupt trace (alias 'step0.loss' is also the name of a tensor in the file)"),
    ({"aliases": json.dumps([ALIAS, TARGET])}, "corrupt trace (metadata 'aliases' must map tensor names to tensor"),
    ({"aliases": json.dumps({ALIAS: 7})}, "corrupt trace (metadata 'aliases' must map tensor names to tensor"),
    ({"aliases": '{"a": '}, "corrupt trace (metadata 'aliases' is not valid JSON"),
    ({"aliases": json.dumps({"": TARGET})}, "corrupt trace (an alias has an empty name)"),
    ({"aliases": json.dumps({"step0.\x1b[31m": TARGET})}, "an alias name contains the control character U+001B"),
])
def test_a_broken_alias_is_one_line(v2_path, edit, message):
    _edit(v2_path, **edit)
    with pytest.raises(TraceError) as info:
        open_trace(v2_path)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert text.startswith(f"{v2_path}: ")
    if "corrupt trace" in message:
        assert text.endswith("; re-record it")


def test_a_version_2_file_without_aliases_reads(v2_path):
    _edit(v2_path, aliases=None)  # version 2 without aliases: a reader takes it, the alias's name is simply absent
    trace = open_trace(v2_path)
    assert ALIAS not in trace and TARGET in trace


def test_aliases_in_an_init_file_are_refused(tmp_path):
    path = write_trace(tmp_path / "init.safetensors", {"params.w": np.zeros(2, np.float32)},
                       {"params": ["w"], "inputs": []}, kind="init")
    _edit(path, aliases=json.dumps({"params.v": "params.w"}), **{"burnside.version": "2"})
    with pytest.raises(TraceError, match="init format version|version '2' is not supported"):
        open_trace(path, kind="init")


def test_a_version_beyond_3_is_refused(v2_path):
    _edit(v2_path, **{"burnside.version": "4"})
    with pytest.raises(TraceError, match="trace format version '4' is not supported .this burnside reads versions "
                                         "1, 2 and 3."):
        open_trace(v2_path)


def test_metadata_aliases_given_to_a_writer_are_the_writers_to_set(tmp_path):
    with pytest.raises(TraceError, match="metadata 'aliases' is the writer's to set"):
        write_trace(tmp_path / "t.json", a1_like_tensors(), base_metadata() | {"aliases": {}})


def test_an_alias_whose_step_is_beyond_the_tensors_is_caught_by_the_steps_check(v2_path):
    _edit(v2_path, aliases=json.dumps({"step1.params_before.fc2.bias": TARGET}))
    with pytest.raises(TraceError, match="metadata 'steps' is 1 but the tensors cover 2 steps"):
        open_trace(v2_path)

"""The safetensors reader accepts exactly the specified layout: every loosening is one clear line."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from burnside.errors import TraceError
from burnside.trace import open_trace, write_trace
from burnside.trace.dtypes import as_bf16

from .conftest import a1_like_tensors, base_metadata, join, split


def _rewrite(path, edit):
    n, header, body = split(path)
    edit(header)
    path.write_bytes(join(header, body))


def test_the_writers_own_file_reads(st_path):
    trace = open_trace(st_path)
    assert trace.steps == 1 and "step0.loss" in trace


@pytest.mark.parametrize("delta", [-1, 1, -8, 8])
def test_a_header_length_off_by_a_few_bytes_is_refused(st_path, delta):
    n, header, body = split(st_path)
    # Pad with spaces so a length one short still ends on the closing brace: the old reader's blind spot.
    st_path.write_bytes(join(json.dumps(header) + " " * 16, body, None))
    assert open_trace(st_path).steps == 1
    data = st_path.read_bytes()
    (m,) = struct.unpack("<Q", data[:8])
    st_path.write_bytes(struct.pack("<Q", m + delta) + data[8:])
    with pytest.raises(TraceError, match="belong to no tensor|not one JSON object"):
        open_trace(st_path)


def test_a_header_length_beyond_the_bound_names_the_bound(st_path):
    data = st_path.read_bytes()
    st_path.write_bytes(struct.pack("<Q", 2**40) + data[8:])
    with pytest.raises(TraceError, match="more than the 104857600 bytes allowed"):
        open_trace(st_path)


def test_trailing_bytes_are_refused(st_path):
    st_path.write_bytes(st_path.read_bytes() + b"\0\0\0")
    with pytest.raises(TraceError, match="3 bytes after the last tensor belong to no tensor"):
        open_trace(st_path)


def test_overlapping_offsets_are_refused(st_path):
    def overlap(header):
        header["step0.loss"]["data_offsets"] = header["step0.logits"]["data_offsets"][:1] + [
            header["step0.logits"]["data_offsets"][0] + 4]

    _rewrite(st_path, overlap)
    with pytest.raises(TraceError, match="overlap|belong to no tensor"):
        open_trace(st_path)


def test_a_gap_between_tensors_is_refused(st_path):
    n, header, body = split(st_path)
    last = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
    begin, end = header[last]["data_offsets"]
    header[last]["data_offsets"] = [begin + 4, end + 4]
    st_path.write_bytes(join(header, body + b"\0" * 4))
    with pytest.raises(TraceError, match=f"4 bytes before tensor '{last}' belong to no tensor"):
        open_trace(st_path)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("data_offsets", [0.0, 4.0], "not two integers"),
    ("data_offsets", [8, 4], "not two integers"),
    ("data_offsets", [-4, 0], "not two integers"),
    ("data_offsets", [0, 4, 8], "not two integers"),
    ("data_offsets", "0,4", "not two integers"),
    ("shape", "[]", "not a list of non-negative integers"),
    ("shape", [True], "not a list of non-negative integers"),
    ("shape", [1.0], "not a list of non-negative integers"),
    ("shape", [-1], "not a list of non-negative integers"),
    ("shape", [1] * 33, "33 dimensions, more than the 32 allowed"),
    ("shape", [1] * 65, "65 dimensions, more than the 32 allowed"),
    ("shape", [0, 10**30], "more than the 281474976710656 \\(2\\^48\\) elements allowed"),
    ("dtype", ["F32"], "not a dtype name"),
    ("dtype", "F8", "unsupported dtype 'F8'"),
    ("dtype", None, "not a dtype name"),
])
def test_an_entry_of_the_wrong_type_names_the_tensor(st_path, field, value, message):
    _rewrite(st_path, lambda header: header["step0.loss"].__setitem__(field, value))
    with pytest.raises(TraceError, match=message) as info:
        open_trace(st_path)
    assert "step0.loss" in str(info.value) or "dimensions" in str(info.value)


def test_an_entry_with_an_unknown_or_missing_field_is_refused(st_path):
    _rewrite(st_path, lambda header: header["step0.loss"].__setitem__("extra", 1))
    with pytest.raises(TraceError, match="exactly dtype, shape and data_offsets"):
        open_trace(st_path)
    _rewrite(st_path, lambda header: (header["step0.loss"].pop("extra"), header["step0.loss"].pop("dtype")))
    with pytest.raises(TraceError, match="exactly dtype, shape and data_offsets"):
        open_trace(st_path)


def test_duplicate_keys_in_the_header_are_refused(st_path):
    n, header, body = split(st_path)
    text = json.dumps(header)
    entry = json.dumps({"step0.loss": header["step0.loss"]})[1:-1]
    st_path.write_bytes(join("{" + entry + ", " + text[1:], body))
    with pytest.raises(TraceError, match="duplicate key 'step0.loss'"):
        open_trace(st_path)
    meta = json.dumps({"__metadata__": {"framework": "burn"}})[1:-1]
    st_path.write_bytes(join("{" + meta + ", " + text[1:], body))
    with pytest.raises(TraceError, match="duplicate key '__metadata__'"):
        open_trace(st_path)


def test_a_header_that_is_not_utf8_or_not_an_object(st_path):
    n, header, body = split(st_path)
    raw = b'{"a\xff": 1}      '
    st_path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    with pytest.raises(TraceError, match="corrupt safetensors header \\(not UTF-8\\)"):
        open_trace(st_path)
    st_path.write_bytes(join("[1, 2]", body))
    with pytest.raises(TraceError, match="not one JSON object"):
        open_trace(st_path)


def test_a_header_nested_100000_deep_is_refused_without_recursion(st_path):
    n, header, body = split(st_path)
    deep = "[" * 100_000 + "]" * 100_000
    st_path.write_bytes(join('{"__metadata__": {"x": "1"}, "junk": ' + deep + "}", body))
    with pytest.raises(TraceError, match="nested 100001 levels deep, more than the 64 allowed"):
        open_trace(st_path)


def test_metadata_that_is_not_strings_is_refused(st_path):
    _rewrite(st_path, lambda header: header["__metadata__"].__setitem__("steps", 1))
    with pytest.raises(TraceError, match="__metadata__ must map strings to strings"):
        open_trace(st_path)


@pytest.mark.parametrize(("key", "text", "message"), [
    ("params", "[" * 100_000 + "]" * 100_000, "nested 100000 levels deep, more than the 64 allowed"),
    ("steps", "NaN", "bare NaN is not JSON"),
    ("steps", "1e400", "number 1e400 is out of range"),
    ("steps", "1" * 400, "an integer of 400 digits is out of range"),
    ("optimizer", '{"name": "sgd", "name": "adam"}', "duplicate key 'name'"),
])
def test_a_metadata_json_value_that_is_not_strict_json_is_refused(st_path, key, text, message):
    _rewrite(st_path, lambda header: header["__metadata__"].__setitem__(key, text))
    with pytest.raises(TraceError, match=f"metadata '{key}' is not valid JSON \\({message}"):
        open_trace(st_path)


def test_a_bool_byte_other_than_0_or_1_is_refused(tmp_path):
    """Found by the fuzzer (offsets swapped onto float bytes): 0x3f read as true, and convert wrote 0x01."""
    import numpy as np

    from burnside.trace import write_trace

    from .conftest import tiny_metadata, tiny_tensors

    path = write_trace(tmp_path / "t.safetensors", tiny_tensors() | {"step0.extra.mask": np.array([True, False])},
                       tiny_metadata())
    n, header, body = split(path)
    begin, end = header["step0.extra.mask"]["data_offsets"]
    body = body[:begin] + b"\x01\x3f" + body[end:]
    path.write_bytes(join(header, body))
    with pytest.raises(TraceError, match="tensor 'step0.extra.mask' is BOOL but element 1 is the byte 0x3f"):
        open_trace(path)


@pytest.mark.parametrize("dtype", ["BF16", "F16"])
@pytest.mark.parametrize(("edit", "message"), [
    # an odd byte count: no whole number of 16-bit words
    (lambda e: e.__setitem__("data_offsets", [e["data_offsets"][0], e["data_offsets"][1] - 1]),
     r"has 5 bytes of data for shape \[3\] {dtype} \(6 expected\)"),
    # a shape that claims more words than the data holds
    (lambda e: e.__setitem__("shape", [4]), r"has 6 bytes of data for shape \[4\] {dtype} \(8 expected\)"),
    # a shape of 2-d words the data does not hold
    (lambda e: e.__setitem__("shape", [2, 2]), r"has 6 bytes of data for shape \[2, 2\] {dtype} \(8 expected\)"),
])
def test_a_hostile_half_precision_entry_is_one_line(tmp_path, dtype, edit, message):
    """A BF16 or F16 tensor whose byte length is not its shape's words (odd, too short) is refused in one line
    naming it, as an F32 one is; the file the writer wrote reads."""
    words = np.array([0x3F80, 0x8000, 0x7FC1], dtype=np.uint16)
    tensors = {**a1_like_tensors(), "step0.extra.half": as_bf16(words) if dtype == "BF16" else words.view(np.float16)}
    path = write_trace(tmp_path / "t.safetensors", tensors, base_metadata())
    assert open_trace(path).info("step0.extra.half").dtype == dtype
    _rewrite(path, lambda header: edit(header["step0.extra.half"]))
    with pytest.raises(TraceError, match=message.format(dtype=dtype)) as info:
        open_trace(path)
    assert "step0.extra.half" in str(info.value) and "\n" not in str(info.value)

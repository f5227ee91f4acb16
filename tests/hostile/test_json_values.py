"""The JSON form is read exactly: no default dtype, no value silently out of range, no duplicate, UTF-8 only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from burnside.errors import TraceError
from burnside.trace import convert_trace, open_trace, write_trace

from .conftest import tiny_metadata, tiny_tensors


def _doc(tensors: dict) -> dict:
    return {"format": "burnside-trace", "version": 1, "metadata": tiny_metadata(), "tensors": tensors}


def _write(tmp_path, spec: dict, text: str | None = None):
    path = tmp_path / "t.json"
    path.write_text(text if text is not None else json.dumps(_doc({"step0.loss": spec})))
    return path


@pytest.mark.parametrize(("spec", "message"), [
    ({"shape": [1], "data": [1.0]}, "exactly dtype, shape and data"),
    ({"dtype": "F32", "shape": [1], "data": [1.0], "extra": 0}, "exactly dtype, shape and data"),
    ({"dtype": ["F32"], "shape": [1], "data": [1.0]}, "has dtype \\['F32'\\], not a dtype name"),
    ({"dtype": "F32", "shape": [True], "data": [1.0]}, "not a list of non-negative integers"),
    ({"dtype": "F32", "shape": "[1]", "data": [1.0]}, "not a list of non-negative integers"),
    ({"dtype": "F32", "shape": [1] * 65, "data": [1.0]}, "65 dimensions, more than the 32 allowed"),
    ({"dtype": "F32", "shape": [0, 10**30], "data": []}, "elements allowed"),
    ({"dtype": "F32", "shape": [1], "data": "1.0"}, "data must be a list"),
    ({"dtype": "I64", "shape": [1], "data": [2**63]}, "value #0 \\(9223372036854775808\\) is out of range for I64"),
    ({"dtype": "I64", "shape": [1], "data": [2**64]}, "out of range for I64"),
    ({"dtype": "I64", "shape": [1], "data": [-(2**63) - 1]}, "out of range for I64"),
    ({"dtype": "U8", "shape": [1], "data": [-1]}, "out of range for U8 \\(0 to 255\\)"),
    ({"dtype": "U8", "shape": [1], "data": [256]}, "out of range for U8"),
    ({"dtype": "I64", "shape": [1], "data": [True]}, "value #0 is True, not a I64 value"),
    ({"dtype": "I64", "shape": [1], "data": [1.0]}, "not a I64 value"),
    ({"dtype": "BOOL", "shape": [1], "data": [1]}, "not a BOOL value"),
    ({"dtype": "F32", "shape": [1], "data": [10**39]}, "value #0 \\(1e\\+39\\) is out of range for F32"),
    ({"dtype": "F32", "shape": [1], "data": [3.5e38]}, "out of range for F32"),
    ({"dtype": "F32", "shape": [1], "data": [int("9" * 309)]}, "out of range for F32"),
    ({"dtype": "F16", "shape": [1], "data": [70000.0]}, "out of range for F16"),
    ({"dtype": "BF16", "shape": [1], "data": [3.4e38]}, "out of range for BF16"),
    ({"dtype": "F32", "shape": [1], "data": ["nan"]}, "value #0 is 'nan', not a number"),
    ({"dtype": "F32", "shape": [1], "data": ["NaN:0x7f800000"]}, "not a number"),  # that is +inf's bits
    ({"dtype": "F32", "shape": [1], "data": ["NaN:0x7fc0"]}, "the 8 hex digits of a F32 NaN"),
    ({"dtype": "F32", "shape": [1], "data": [None]}, "value #0 is None, not a number"),
])
def test_a_bad_tensor_spec_names_the_tensor(tmp_path, spec, message):
    with pytest.raises(TraceError, match=message) as info:
        open_trace(_write(tmp_path, spec))
    assert "step0.loss" in str(info.value) or "dimensions" in str(info.value)


@pytest.mark.parametrize(("number", "message"), [
    ("1e400", "value #0 \\(a decimal beyond ±1.8e308\\) is out of range for a 64-bit float"),
    ("-1e400", "value #0 \\(a decimal beyond ±1.8e308\\) is out of range for a 64-bit float"),
    ("1" + "0" * 400, "an integer of 401 digits is out of range \\(at most 310 digits\\)"),
    ("1" * 5000, "an integer of 5000 digits is out of range"),
    ("NaN", "bare NaN is not JSON"),
    ("Infinity", "bare Infinity is not JSON"),
])
def test_numbers_beyond_json_or_f64_are_refused_not_turned_into_inf(tmp_path, number, message):
    text = json.dumps(_doc({"step0.loss": {"dtype": "F64", "shape": [1], "data": [0.5]}})).replace("0.5", number)
    with pytest.raises(TraceError, match=message):
        open_trace(_write(tmp_path, {}, text))


def test_duplicate_keys_are_refused(tmp_path):
    text = json.dumps(_doc({"step0.loss": {"dtype": "F32", "shape": [1], "data": [1.0]}}))
    text = text.replace('"dtype": "F32"', '"dtype": "F64", "dtype": "F32"')
    with pytest.raises(TraceError, match="duplicate key 'dtype'"):
        open_trace(_write(tmp_path, {}, text))


def test_non_utf8_and_deep_nesting_get_one_clear_line(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"format": "burnside-trace\xff"}')
    with pytest.raises(TraceError, match="is not UTF-8 \\(byte 0xff at offset 26\\)"):
        open_trace(path)
    path.write_text('{"format": "burnside-trace", "version": 1, "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceError, match="nested 100001 levels deep, more than the 64 allowed"):
        open_trace(path)


def test_a_json_trace_beyond_the_size_bound_is_refused_before_reading(tmp_path, monkeypatch):
    import burnside.trace.trace as trace_module

    path = write_trace(tmp_path / "t.json", tiny_tensors(), tiny_metadata())
    monkeypatch.setattr(trace_module, "MAX_JSON_BYTES", 100)
    with pytest.raises(TraceError, match="bytes is more than the 100 bytes allowed; keep large traces in safetensors"):
        open_trace(path)


def test_unknown_top_level_keys_and_a_string_version_are_refused(tmp_path):
    doc = _doc({"step0.loss": {"dtype": "F32", "shape": [], "data": [1.0]}})
    with pytest.raises(TraceError, match="unknown top-level key 'comment'"):
        open_trace(_write(tmp_path, {}, json.dumps(doc | {"comment": "x"})))
    with pytest.raises(TraceError, match="version '1' is not supported"):
        open_trace(_write(tmp_path, {}, json.dumps(doc | {"version": "1"})))


def test_decimals_round_to_nearest_and_bf16_rounds_once_to_nearest_even(tmp_path):
    # 1 + 2^-8 lies halfway between two bf16 values: ties go to the even one (1.0), and
    # 1 + 3*2^-9 (above the midpoint) rounds up; truncation would give 1.0 for both.
    # 1e-40 is below bf16's normal range: it rounds to the smallest subnormal, 2^-133.
    spec = {"dtype": "BF16", "shape": [4], "data": [1 + 2**-8, 1 + 3 * 2**-9, -(1 + 3 * 2**-9), 1e-40]}
    trace = open_trace(_write(tmp_path, spec))
    assert trace.values("step0.loss").tolist() == [1.0, 1.0078125, -1.0078125, 2.0**-133]
    f32 = open_trace(_write(tmp_path, {"dtype": "F32", "shape": [2], "data": [0.1, 3.4028235e38]}))
    assert f32.array("step0.loss").tolist() == [np.float32(0.1), np.float32(3.4028235e38)]


def test_nan_payloads_survive_convert_both_ways_bit_for_bit(tmp_path):
    bits32 = np.array([0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32)
    bits64 = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001], dtype=np.uint64)
    bits16 = np.array([0x7E00, 0xFE00, 0x7C01], dtype=np.uint16)
    tensors = tiny_tensors() | {"step0.logits": bits32.view(np.float32), "step0.extra.f64": bits64.view(np.float64),
                                "step0.extra.f16": bits16.view(np.float16)}
    st = write_trace(tmp_path / "a.safetensors", tensors, tiny_metadata())
    js = convert_trace(st, tmp_path / "b.json")
    back = convert_trace(js, tmp_path / "c.safetensors")
    again = convert_trace(back, tmp_path / "d.json")
    for path in (st, js, back, again):
        trace = open_trace(path)
        assert trace.array("step0.logits").view(np.uint32).tolist() == bits32.tolist(), path
        assert trace.array("step0.extra.f64").view(np.uint64).tolist() == bits64.tolist(), path
        assert trace.array("step0.extra.f16").view(np.uint16).tolist() == bits16.tolist(), path
    data = json.loads(js.read_text())["tensors"]
    # The default quiet NaN stays the plain "NaN" that every JSON trace so far has used.
    assert data["step0.logits"]["data"] == ["NaN", "NaN:0xffc00000", "NaN:0x7fc00001", "NaN:0x7f800001",
                                           "NaN:0xffffffff"]
    assert data["step0.extra.f64"]["data"][0] == "NaN"
    assert data["step0.extra.f16"]["data"] == ["NaN", "NaN:0xfe00", "NaN:0x7c01"]
    assert json.loads(again.read_text()) == json.loads(js.read_text())


def test_plain_nan_reads_as_each_dtypes_default_nan(tmp_path):
    for dtype, bits, view in (("F32", 0x7FC00000, np.uint32), ("F64", 0x7FF8000000000000, np.uint64),
                              ("F16", 0x7E00, np.uint16), ("BF16", 0x7FC0, np.uint16)):
        trace = open_trace(_write(tmp_path, {"dtype": dtype, "shape": [1], "data": ["NaN"]}))
        assert trace.array("step0.loss").view(view).tolist() == [bits], dtype

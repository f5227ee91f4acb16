"""Trace files: both forms bit-exact, and one clear line for every kind of bad input."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from burnside.errors import TraceError
from burnside.trace import convert_trace, open_trace, write_trace
from burnside.trace.dtypes import as_bf16

from .conftest import a1_like_tensors, base_metadata, run_cli


def _special() -> dict[str, np.ndarray]:
    t = a1_like_tensors()
    t["step0.logits"] = np.array([[np.nan, np.inf, -np.inf], [0.1, -0.0, 1e-45], [3.4e38, 1.17549435e-38, 1 / 3],
                                  [np.float32(0.1) * 3, 7.0, -2.5]], dtype=np.float32)
    t["step0.optim.step.fc1.weight"] = np.array(1.0, dtype=np.float32)
    t["step0.extra.f64"] = np.array([np.pi, 1e-300], dtype=np.float64)
    t["step0.extra.f16"] = np.array([0.1, 65504], dtype=np.float16)
    t["step0.extra.f16_words"] = np.array(F16_WORDS, dtype=np.uint16).view(np.float16)
    t["step0.extra.bf16"] = as_bf16(np.array(BF16_WORDS, dtype=np.uint16))
    return t


#: Half words that catch a wrong conversion: +-0, the smallest and largest subnormals, the smallest normal, 1,
#: the largest finite of each sign, +-inf, a NaN with a payload and a negative quiet NaN.
BF16_WORDS = [0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC1, 0xFFC0]
F16_WORDS = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E01, 0xFE00]


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize(("dtype", "words", "name"), [("bfloat16", BF16_WORDS, "BF16"),
                                                      ("float16", F16_WORDS, "F16")])
def test_a_half_model_s_init_file_round_trips_word_for_word(dtype, words, name, tmp_path):
    """A bfloat16 / float16 model's weights and batch, written by `export_init` and read back: the same words,
    stored as BF16 / F16 (safetensors' own reader agrees), values widened exactly."""
    import torch
    from safetensors import safe_open

    from burnside.torch import export_init
    model = torch.nn.Linear(len(words), 1).to(getattr(torch, dtype))
    with torch.no_grad():
        model.weight.copy_(torch.tensor(words, dtype=torch.int32).to(torch.int16).view(getattr(torch, dtype)))
    x = model.weight.detach().clone()
    path = export_init(model, {"x": x}, tmp_path / "init.safetensors")
    init = open_trace(path, kind="init")
    for key in ("params.weight", "inputs.x"):
        assert init.info(key).dtype == name
        assert np.ascontiguousarray(init.array(key)).view(np.uint16).flatten().tolist() == words
    with safe_open(path, "pt") as f:
        back = f.get_tensor("params.weight")
    assert back.dtype == getattr(torch, dtype) and back.view(torch.int16).flatten().tolist() == \
        torch.tensor(words, dtype=torch.int32).to(torch.int16).tolist()
    widened, exact = init.values("params.weight").astype(np.float64), model.weight.detach().double().numpy()
    assert np.array_equal(widened, exact, equal_nan=True)
    assert np.array_equal(np.signbit(widened), np.signbit(exact))


def test_json_and_safetensors_round_trip_bit_for_bit(tmp_path):
    tensors = _special()
    st = write_trace(tmp_path / "t.safetensors", tensors, base_metadata())
    js = convert_trace(st, tmp_path / "t.json")
    back = convert_trace(js, tmp_path / "back.safetensors")
    for path in (st, js, back):
        trace = open_trace(path)
        assert set(trace.names) == set(tensors)
        for name, array in tensors.items():
            assert trace.array(name).dtype == array.dtype, (path, name)
            assert trace.array(name).shape == array.shape, (path, name)
            assert _bits(trace.array(name)) == _bits(array), (path, name)
        assert trace.metadata["optimizer"]["lr"] == 0.1
        assert trace.params == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["tensors"]["step0.logits"]["data"][:3] == ["NaN", "Infinity", "-Infinity"]
    assert doc["tensors"]["step0.loss"]["shape"] == []


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        open_trace(tmp_path / "nope.safetensors")


def test_truncated_safetensors(tmp_path):
    path = write_trace(tmp_path / "t.safetensors", a1_like_tensors(), base_metadata())
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(TraceError, match="truncated"):
        open_trace(path)
    path.write_bytes(data[:5])
    with pytest.raises(TraceError, match="not a safetensors file"):
        open_trace(path)


def test_corrupt_header(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", 4) + b"{{{{" + b"\0" * 16)
    with pytest.raises(TraceError, match="corrupt safetensors header"):
        open_trace(path)


def test_plain_safetensors_is_not_a_trace(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "weights.safetensors"
    save_file({"w": np.zeros(3, np.float32)}, str(path))
    with pytest.raises(TraceError, match="not a burnside trace file"):
        open_trace(path)


def test_unknown_version_is_refused(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"format": "burnside-trace", "version": 7, "metadata": {}, "tensors": {}}))
    with pytest.raises(TraceError, match="version 7 is not supported"):
        open_trace(path)


def test_an_init_file_is_not_a_trace(tmp_path):
    path = write_trace(tmp_path / "init.safetensors", {"params.w": np.zeros(2, np.float32)},
                       {"params": ["w"], "inputs": []}, kind="init")
    with pytest.raises(TraceError, match="is a burnside init file, expected a trace"):
        open_trace(path)
    assert open_trace(path, kind="init").names == ("params.w",)


@pytest.mark.parametrize(("value", "message"), [
    ('"abc"', "not a number"),
    ("null", "not a number"),
    ("NaN", "bare NaN is not JSON"),
    ("[1]", "not a number"),
])
def test_json_with_non_numbers(tmp_path, value, message):
    path = tmp_path / "t.json"
    path.write_text('{"format": "burnside-trace", "version": 1, "metadata": {}, '
                    f'"tensors": {{"step0.loss": {{"dtype": "F32", "shape": [1], "data": [{value}]}}}}}}')
    with pytest.raises(TraceError, match=message):
        open_trace(path)


def test_json_truncated_and_wrong_count(tmp_path):
    path = write_trace(tmp_path / "t.json", a1_like_tensors(), base_metadata())
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(TraceError, match="invalid JSON"):
        open_trace(path)
    path.write_text('{"format": "burnside-trace", "version": 1, "metadata": {}, "tensors": '
                    '{"step0.logits": {"dtype": "F32", "shape": [2, 2], "data": [1, 2, 3]}}}')
    with pytest.raises(TraceError, match="3 values for shape"):
        open_trace(path)


def test_a_tensor_a_trace_cannot_hold_is_refused_before_writing(tmp_path):
    bad = {"step0.loss": np.array(["not a float"])}
    with pytest.raises(TraceError, match="dtype <U11, which a trace cannot hold"):
        write_trace(tmp_path / "t.safetensors", bad, base_metadata())
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    from burnside.atomic import atomic_output

    target = tmp_path / "t.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(target, "w") as handle:
        handle.write("half of the new")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_cli_bad_input_is_one_line_exit_2_no_traceback(tmp_path):
    good = write_trace(tmp_path / "good.safetensors", a1_like_tensors(), base_metadata())
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(good.read_bytes()[:100])
    for args in (["compare", str(tmp_path / "missing.json"), str(good)],
                 ["compare", str(good), str(broken)],
                 ["convert", str(broken), str(tmp_path / "x.json")]):
        proc = run_cli(*args)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_an_output_directory_that_cannot_be_made_is_one_line_exit_2():
    proc = run_cli("run", "a1", "--side", "torch", "--out-dir", "/proc/burnside-out")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: /proc/burnside-out: No such file or directory"

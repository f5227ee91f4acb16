"""Streamed recording: `burnside.trace.stream.TraceWriter` and the recorders that write through it.

Every recording runs a real PyTorch loop. A streamed trace must hold exactly what the in-memory writer
would have held, stay a plain safetensors file (`safetensors.safe_open` reads it), keep f64 data
8-byte aligned, and never leave a partial file at the output path.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from torch import nn

from burnside.errors import BurnsideError, TraceError
from burnside.recording.reference import record_reference
from burnside.torch import record, record_forward
from burnside.trace import open_trace, write_trace
from burnside.trace.stream import BASE_RESERVE, TraceWriter

STEPS = 3


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))


def _batches() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [{"x": torch.randn(5, 6, generator=g), "y": torch.randint(0, 3, (5,), generator=g)} for _ in range(STEPS)]


def _record(path: Path, **kwargs) -> Path:
    model = _model()
    return record(model, torch.optim.Adam(model.parameters(), lr=1e-2), _batches(), path, **kwargs)


def _header(path: Path) -> tuple[int, dict]:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return n, json.loads(data[8:8 + n])


def _left(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_streamed_trace_holds_bit_for_bit_what_the_in_memory_writer_holds(tmp_path):
    streamed = open_trace(_record(tmp_path / "s.safetensors", layer_inputs=True))
    in_memory = open_trace(_record(tmp_path / "m.json", layer_inputs=True))  # the JSON form is written in memory
    assert streamed.names == in_memory.names
    assert streamed.metadata == in_memory.metadata
    for name in streamed.names:
        a, b = streamed.array(name), in_memory.array(name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), name


def test_the_writer_writes_what_write_trace_writes_nan_payloads_included(tmp_path):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=(37,), dtype=np.uint64).astype(np.uint32)
    bits[:4] = [0x7FC00001, 0xFFC00000, 0x7F800000, 0x00000001]  # NaN payloads, -NaN, inf, a subnormal
    tensors = {"step0.loss": np.array(2.5, np.float32), "step0.inputs.y": np.array([1, 0, 2], np.int64),
               "step0.inputs.m": np.array([True, False, True]), "step0.logits": bits.view(np.float32).reshape(1, 37),
               "step0.inputs.h": np.arange(7, dtype=np.float16), "step0.inputs.x": np.zeros((0, 4), np.float64)}
    meta = {"framework": "pytorch", "framework_version": "test", "device": "cpu", "dtype": "float32", "steps": 1,
            "optimizer": {"name": "sgd", "lr": 0.1}, "params": [], "grads_len": [0]}
    with TraceWriter(tmp_path / "s.safetensors", expected_tensors=len(tensors)) as writer:
        for name, array in tensors.items():
            writer.add(name, array)
        writer.finish(meta)
    streamed, kept = open_trace(tmp_path / "s.safetensors"), open_trace(write_trace(tmp_path / "w.safetensors",
                                                                                    tensors, meta))
    assert streamed.names == kept.names and streamed.metadata == kept.metadata
    for name in kept.names:
        assert streamed.array(name).tobytes() == kept.array(name).tobytes(), name
        assert streamed.info(name) == kept.info(name), name


def test_params_before_after_step_0_are_aliases_of_the_previous_params_after(tmp_path):
    path = _record(tmp_path / "t.safetensors")
    _, header = _header(path)
    meta = header["__metadata__"]
    assert meta["burnside.version"] == "2"
    aliases = json.loads(meta["aliases"])
    params = json.loads(meta["params"])
    assert {a: t for a, t in aliases.items() if ".params_before." in a} == {
        f"step{k}.params_before.{p}": f"step{k - 1}.params_after.{p}" for k in range(1, STEPS) for p in params}
    assert "step0.params_before.0.weight" in header  # step 0's are the start, written in full
    assert not set(aliases) & set(header)  # no data of their own
    trace = open_trace(path)
    assert trace.aliases == aliases
    for alias, target in aliases.items():
        assert alias in trace.names
        assert trace.info(alias) == trace.info(target)
        assert trace.array(alias).tobytes() == trace.array(target).tobytes()
        trace.release(alias)


def test_safetensors_reads_the_streamed_file(tmp_path):
    path = _record(tmp_path / "t.safetensors")
    trace = open_trace(path)
    with safe_open(str(path), framework="np") as f:
        keys = set(f.keys())
        assert keys == set(trace.names) - set(trace.aliases)
        for name in keys:
            assert f.get_tensor(name).tobytes() == trace.array(name).tobytes(), name


def test_the_float64_reference_keeps_its_f64_data_8_byte_aligned_after_f32_scalars(tmp_path):
    model = _model()
    path = record_reference(model, torch.optim.Adam(model.parameters(), lr=1e-2), _batches(),
                            tmp_path / "ref.safetensors", variants=False, layer_inputs=True)
    n, header = _header(path)
    assert n % 8 == 0
    dtypes = {e["dtype"] for k, e in header.items() if k != "__metadata__"}
    assert {"F64", "F32", "I64"} <= dtypes  # Adam's f32 step counters among f64 tensors
    for name, entry in header.items():
        if name != "__metadata__" and entry["dtype"] == "F64":
            assert (8 + n + entry["data_offsets"][0]) % 8 == 0, name
    trace = open_trace(path)
    assert trace.metadata["layer_inputs"] and "step2.layer_inputs.0" in trace
    assert trace.array("step0.params_before.0.weight").flags.aligned


def test_small_unaligned_tensors_are_held_and_written_widest_first(tmp_path):
    path = tmp_path / "t.safetensors"
    big = np.arange(3 * 4096, dtype=np.float64)
    with TraceWriter(path, expected_tensors=8) as writer:
        writer.add("step0.optim.step.a", np.array(1.0, np.float32))  # 4 bytes: would misalign what follows
        writer.add("step0.params_after.a", big)
        writer.add("step0.inputs.b", np.array([1, 2, 3], np.int8))
        writer.add("step0.params_after.b", big + 1)
        writer.add("step0.loss", np.array(0.5, np.float64))
        writer.add("step0.optim.step.b", np.array(2.0, np.float32))
        writer.finish({"framework": "x", "framework_version": "1", "device": "cpu", "dtype": "float64", "steps": 1,
                       "optimizer": {"name": "adam"}, "params": ["a", "b"], "grads_len": [0]})
    n, header = _header(path)
    begin = {k: e["data_offsets"][0] for k, e in header.items() if k != "__metadata__"}
    assert begin["step0.params_after.a"] == 0 and begin["step0.params_after.b"] == big.nbytes
    # held, then written at finish: the f64 scalar, the f32 ones, the bytes
    order = sorted(begin, key=begin.get)[2:]
    assert order == ["step0.loss", "step0.optim.step.a", "step0.optim.step.b", "step0.inputs.b"]
    assert all((8 + n + begin[k]) % 8 == 0 for k in ("step0.params_after.a", "step0.params_after.b", "step0.loss"))
    trace = open_trace(path)
    assert trace.array("step0.params_after.b").tobytes() == (big + 1).tobytes()
    assert float(trace.array("step0.optim.step.b")) == 2.0


def test_a_header_larger_than_its_reservation_is_copied_behind_the_exact_header(tmp_path):
    path = tmp_path / "t.safetensors"
    names = [f"step0.grads.{'layer' * 30}.{i}.weight" for i in range(600)]  # ~600 x 230 bytes > 64 KiB
    rng = np.random.default_rng(0)
    arrays = {name: rng.standard_normal(3 + i % 5).astype(np.float32) for i, name in enumerate(names)}
    with TraceWriter(path, expected_tensors=0) as writer:  # a reservation of 64 KiB only
        for name, array in arrays.items():
            writer.add(name, array)
        writer.finish({"framework": "x", "framework_version": "1", "device": "cpu", "dtype": "float32", "steps": 1,
                       "optimizer": {"name": "sgd"}, "params": [], "grads_len": [0]})
    n, _ = _header(path)
    assert n > BASE_RESERVE + 8  # beyond the reservation: the slow path wrote the exact header
    raw = path.read_bytes()[8:8 + n]
    assert raw.endswith(b"}" + b" " * (n - len(raw.rstrip(b" ")))) and len(raw.rstrip(b" ")) > n - 8
    trace = open_trace(path)
    for name, array in arrays.items():
        assert trace.array(name).tobytes() == array.tobytes(), name
    assert _left(tmp_path) == ["t.safetensors"]


class _FailsAt:
    """A forward that raises ``error`` at step ``k`` (its k-th call with grad on)."""

    def __init__(self, k: int, error: BaseException) -> None:
        self.k, self.error, self.calls = k, error, 0

    def __call__(self, model: nn.Module, batch) -> torch.Tensor:
        if torch.is_grad_enabled():
            if self.calls == self.k:
                raise self.error
            self.calls += 1
        return model(batch["x"])


@pytest.mark.parametrize("error", [RuntimeError("the forward broke"), KeyboardInterrupt()])
def test_an_interrupted_recording_leaves_no_file_and_no_partial(tmp_path, error):
    path = tmp_path / "t.safetensors"
    with pytest.raises(type(error)):
        _record(path, forward=_FailsAt(2, error))
    assert _left(tmp_path) == []


def test_a_failed_recording_leaves_the_previous_file_as_it_was(tmp_path):
    path = _record(tmp_path / "t.safetensors")
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="the forward broke"):
        _record(path, forward=_FailsAt(1, RuntimeError("the forward broke")))
    assert path.read_bytes() == before
    assert _left(tmp_path) == ["t.safetensors"]


def test_a_refused_metadata_at_finish_leaves_nothing(tmp_path):
    with pytest.raises(TraceError, match="metadata 'steps' is 2 but the tensors cover 1 step"), \
            TraceWriter(tmp_path / "t.safetensors") as writer:
        writer.add("step0.loss", np.array(1.0, np.float32))
        writer.finish({"framework": "x", "framework_version": "1", "device": "cpu", "dtype": "float32", "steps": 2,
                       "optimizer": {"name": "sgd"}, "params": [], "grads_len": [0, 0]})
    assert _left(tmp_path) == []


def test_the_writer_refuses_a_name_twice_and_a_bad_alias(tmp_path):
    with TraceWriter(tmp_path / "t.safetensors") as writer:
        writer.add("step0.loss", np.array(1.0, np.float32))
        with pytest.raises(TraceError, match="'step0.loss' is recorded twice"):
            writer.add("step0.loss", np.array(2.0, np.float32))
        with pytest.raises(TraceError, match="not a tensor added before it"):
            writer.alias("step1.loss", "step0.logits")
        writer.alias("step1.loss", "step0.loss")
        with pytest.raises(TraceError, match="another alias"):
            writer.alias("step2.loss", "step1.loss")
        with pytest.raises(TraceError, match="'step1.loss' is recorded twice"):
            writer.add("step1.loss", np.array(2.0, np.float32))
    assert _left(tmp_path) == []


def test_a_writer_dropped_unfinished_removes_its_temporary_file(tmp_path):
    writer = TraceWriter(tmp_path / "t.safetensors")
    writer.add("step0.logits", np.zeros(1000, np.float32))
    partial = _left(tmp_path)
    assert len(partial) == 1 and partial[0].startswith(f".t.safetensors.{os.getpid()}.")
    assert partial[0].endswith(".partial")
    del writer
    assert _left(tmp_path) == []


def test_forward_traces_stream_too(tmp_path):
    model = _model()
    batches = [{"x": b["x"]} for b in _batches()]
    streamed = open_trace(record_forward(model, batches, tmp_path / "f.safetensors"))
    kept = open_trace(record_forward(model, batches, tmp_path / "f.json"))
    assert streamed.names == kept.names and streamed.metadata == kept.metadata
    for name in kept.names:
        assert streamed.array(name).tobytes() == kept.array(name).tobytes(), name


def test_training_layer_inputs_are_what_each_module_was_fed_and_compare_orders_them_first(tmp_path):
    trace = open_trace(_record(tmp_path / "t.safetensors", layer_inputs=True))
    assert trace.metadata["layer_inputs"] == ["0", "1", "2", "3"]
    assert trace.metadata["modules"]["0"] == "Linear"
    for k in range(STEPS):
        assert trace.array(f"step{k}.layer_inputs.0").tobytes() == trace.array(f"step{k}.inputs.x").tobytes()
        for feeder, fed in (("0", "1"), ("1", "2"), ("2", "3")):
            assert (trace.array(f"step{k}.layer_inputs.{fed}").tobytes()
                    == trace.array(f"step{k}.activations.{feeder}").tobytes())
    names = [n for n in trace.names if n.startswith("step1.")]
    stages = [n.split(".")[1] for n in names]
    assert stages.index("layer_inputs") < stages.index("activations") < stages.index("logits")
    assert "step0.layer_inputs.0" not in open_trace(_record(tmp_path / "u.safetensors", layer_inputs=False))


def test_an_unknown_suffix_is_refused_before_training(tmp_path):
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(BurnsideError, match="unknown trace suffix '.npz'"):
        record(model, torch.optim.SGD(model.parameters(), lr=0.1), _batches(), tmp_path / "t.npz")
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


_NO_ROOM = textwrap.dedent("""
    import resource, signal, sys
    import torch
    from torch import nn
    from burnside.errors import BurnsideError
    from burnside.torch import record

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    batch = {"x": torch.randn(8, 64), "y": torch.randint(0, 4, (8,))}
    try:
        record(model, torch.optim.Adam(model.parameters()), batch, sys.argv[1], steps=20)
    except BurnsideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
""")


def test_no_room_mid_recording_is_one_line_with_the_bytes_written_and_leaves_nothing(tmp_path):
    path = tmp_path / "t.safetensors"
    proc = subprocess.run([sys.executable, "-c", _NO_ROOM, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {path}: larger than the file-size limit (ulimit -f) of 200000 bytes"), \
        proc.stderr
    assert " more than " in proc.stderr and proc.stderr.endswith(" to write; nothing was written\n"), proc.stderr
    assert _left(tmp_path) == []


def test_record_with_a_reference_records_layer_inputs_on_both_sides(tmp_path):
    path = _record(tmp_path / "t.safetensors", layer_inputs=True, reference=tmp_path / "ref.safetensors",
                   reference_variants=False)
    trace, reference = open_trace(path), open_trace(tmp_path / "ref.safetensors")
    assert trace.metadata["layer_inputs"] == reference.metadata["layer_inputs"] == ["0", "1", "2", "3"]
    assert reference.info("step1.layer_inputs.3").dtype == "F64"
    assert reference.aliases and trace.aliases  # both streamed, params_before aliased


def test_the_disk_is_told_to_write_out_each_stretch_once_in_order_and_the_trace_is_unchanged(tmp_path, monkeypatch):
    import burnside.trace.stream as stream

    plain = open_trace(_record(tmp_path / "plain.safetensors", layer_inputs=True))
    calls: list[tuple[int, int]] = []
    real = stream._sync_file_range

    def told(fd: int, begin: int, length: int, flags: int) -> int:
        calls.append((begin, length))
        return real(fd, begin, length, flags) if real is not None else 0

    monkeypatch.setattr(stream, "_sync_file_range", told)
    monkeypatch.setattr(stream, "WRITEBACK_EVERY", 1024)
    path = _record(tmp_path / "told.safetensors", layer_inputs=True)
    assert len(calls) > 3
    assert calls[0][0] == 0 and all(b == a + n for (a, n), (b, _) in zip(calls, calls[1:]))
    assert all(n >= 1024 for _, n in calls)
    assert calls[-1][0] + calls[-1][1] <= path.stat().st_size
    told_trace = open_trace(path)
    assert told_trace.names == plain.names
    for name in plain.names:
        assert told_trace.array(name).tobytes() == plain.array(name).tobytes(), name
    if sys.platform == "linux":
        assert real is not None  # the real call is found where the recorders run in CI

"""Half precision across the two sides, with real PyTorch and real burn programs: a bfloat16 / float16 model's
trace and init file written by Python, read by the burn port (`accum_port/`, whose MLP is f32) that loads the half
weights widened exactly and records its trace, read back by Python word for word; and the bf16 and f16 tensors the burn
recorder writes (`rust/burnside-trace/tests/half.rs`) read back by Python as its raw words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import xxhash

from burnside.burn.cargo import run_workspace_tests
from burnside.burn.locate import rust_workspace
from burnside.burn.port import record_port
from burnside.torch import record
from burnside.trace import open_trace
from tests.burn.user_port_harness import Mlp, copy_crate

PORT = Path(__file__).resolve().parent / "accum_port"
PORT_ARGS = ["--accumulate", "1", "--optim", "adam"]
HALF = {torch.bfloat16: "BF16", torch.float16: "F16"}
#: Finite half values that catch a wrong conversion: +-0, subnormals, the largest finite and near it, 1, and the
#: smallest normal (in words, so each dtype gets its own): bf16 then f16.
WORDS = {torch.bfloat16: [0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x7F7F, 0xFF7F],
         torch.float16: [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF]}


def _words(array: np.ndarray) -> list[int]:
    return np.ascontiguousarray(array).view(np.uint16).reshape(-1).tolist()


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_a_half_model_loads_into_the_f32_port_widened_exactly(dtype, tmp_path):
    port = copy_crate(PORT, tmp_path / "accum_port")
    torch.manual_seed(0)
    model = Mlp().to(dtype)
    with torch.no_grad():  # fc2's weight holds the special words (fc2 is [3, 8]: its first row)
        model.fc2.weight[0] = torch.tensor(WORDS[dtype], dtype=torch.int32).to(torch.int16).view(dtype)
    batches = [{"x": torch.randn(4, 4).to(dtype), "y": torch.randint(0, 3, (4,))} for _ in range(2)]
    torch_trace = record(model, torch.optim.Adam(model.parameters(), lr=0.01), batches, tmp_path / "torch.safetensors")
    burn = open_trace(record_port(torch_trace, port, "accum_port", PORT_ARGS, tmp_path / "burn"))
    a = open_trace(torch_trace)
    init = open_trace(tmp_path / "burn" / "init.safetensors", kind="init")
    assert init.info("params.fc2.weight").dtype == HALF[dtype]
    assert _words(init.array("params.fc2.weight"))[:8] == WORDS[dtype]
    for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
        key = f"step0.params_before.{name}"
        assert a.info(key).dtype == HALF[dtype] and burn.info(key).dtype == "F32", name
        widened = a.values(key).astype(np.float32)  # exact: every half value is an f32 value
        assert burn.array(key).view(np.uint32).tolist() == widened.view(np.uint32).tolist(), name
    # the batch too: the port reads the half input as f32, exactly
    assert init.info("inputs.x").dtype == HALF[dtype]


@pytest.fixture(scope="module")
def burn_half_traces(tmp_path_factory) -> Path:
    """The traces rust/burnside-trace/tests/half.rs writes: the tiny model's layer tapped as bf16, then as f16."""
    folder = tmp_path_factory.mktemp("burn-half")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BURNSIDE_HALF_TRACES", str(folder))
        proc = run_workspace_tests(rust_workspace(), [
            "-p", "burnside-trace", "--test", "half", "--", "--exact",
            "a_half_tensor_is_recorded_as_its_words_and_its_statistics_hash_them"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


@pytest.mark.parametrize(("dtype", "name"), [(torch.bfloat16, "BF16"), (torch.float16, "F16")], ids=["bf16", "f16"])
def test_a_half_tensor_burn_records_reads_back_in_python_as_its_words(burn_half_traces, dtype, name):
    trace = open_trace(burn_half_traces / f"{name.lower()}.burn.safetensors")
    for k in range(3):
        tapped = f"step{k}.activations.fc"
        assert trace.info(tapped).dtype == name
        logits = torch.from_numpy(np.array(trace.array(f"step{k}.logits")))
        # burn's f32 -> half cast rounds to nearest even, as PyTorch's does
        assert _words(trace.array(tapped)) == _words(logits.to(dtype).view(torch.int16).numpy())
        assert np.array_equal(np.asarray(trace.values(tapped), dtype=np.float32), logits.to(dtype).float().numpy())
        stats = trace.statistics_of(tapped)
        assert stats.dtype == name and stats.shape == tuple(logits.shape)
        # the raw little-endian words hashed, as half.rs asserts burn's Statistics::of does
        assert stats.xxh3 == xxhash.xxh3_128_hexdigest(np.ascontiguousarray(trace.array(tapped)).tobytes())

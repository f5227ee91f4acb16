"""`burnside.torch.record(..., reference=PATH)`: the float64 reference and the trace in one call.

The one call must write what the two calls (`record_reference` before training, then `record`) write, file for
file, tensor for tensor and bit for bit, and train the model exactly as they do; what it refuses it refuses before
anything is
trained or written, and a trace that fails takes the reference files it came with along.
"""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import load_file
from torch import nn

from burnside.compare import open_reference
from burnside.errors import BurnsideError
from burnside.recording.reference import record_reference
from burnside.torch import record

STEPS = 3


class _Net(nn.Module):
    def __init__(self, batchnorm: bool) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 3)
        self.bn = nn.BatchNorm1d(8) if batchnorm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def _loop(optim: str, batchnorm: bool = False) -> tuple[nn.Module, torch.optim.Optimizer, list[dict]]:
    """The same untrained model, fresh optimizer and per-step batches on every call."""
    torch.manual_seed(0)
    model = _Net(batchnorm)
    if optim == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(8, 4, generator=generator), "y": torch.randint(0, 3, (8,), generator=generator)}
               for _ in range(STEPS)]
    return model, opt, batches


def _state(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Every parameter, buffer and optimizer state tensor, by name."""
    names = {id(p): n for n, p in model.named_parameters()}
    state = {f"param.{n}": p.detach().clone() for n, p in model.named_parameters()}
    state |= {f"buffer.{n}": b.clone() for n, b in model.named_buffers()}
    for p, slots in opt.state.items():
        for slot, value in slots.items():
            state[f"optim.{slot}.{names[id(p)]}"] = torch.as_tensor(value).clone()
    return state


def _assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name


def _assert_same_file_contents(a, b) -> None:
    """The safetensors files ``a`` and ``b`` hold the same metadata and the same tensors, bit for bit (their bytes
    may differ: safetensors writes the header's keys in hash order)."""
    with safe_open(a, "np") as fa, safe_open(b, "np") as fb:
        assert fa.metadata() == fb.metadata()
    ta, tb = load_file(a), load_file(b)
    assert ta.keys() == tb.keys()
    for name in ta:
        assert (ta[name].dtype, ta[name].shape) == (tb[name].dtype, tb[name].shape), name
        assert ta[name].tobytes() == tb[name].tobytes(), name


@pytest.mark.parametrize(("optim", "batchnorm", "variant"), [
    ("adam", False, "burn-adam"),
    ("sgd", True, "burn-batchnorm"),
    ("adam", True, "burn-adam+burn-batchnorm"),
    ("sgd", False, None),
])
def test_one_call_writes_the_two_calls_files_bit_for_bit_and_trains_the_same(tmp_path, optim, batchnorm, variant):
    two, one = tmp_path / "two", tmp_path / "one"
    two.mkdir()
    one.mkdir()
    loop = {"steps": STEPS, "metadata": {"model": "net"}}

    model, opt, batches = _loop(optim, batchnorm)
    record_reference(model, opt, batches, two / "r.safetensors", **loop)
    record(model, opt, batches, two / "t.safetensors", **loop)
    trained_by_two = _state(model, opt)

    model, opt, batches = _loop(optim, batchnorm)
    # a generator, as a data loader gives them: read once for the reference's runs and the trace
    returned = record(model, opt, iter(batches), one / "t.safetensors", reference=one / "r.safetensors", **loop)
    assert returned == one / "t.safetensors"

    written = sorted(p.name for p in two.iterdir())
    expected = ["r.safetensors", "t.safetensors"] + ([f"r.{variant}.safetensors"] if variant else [])
    assert written == sorted(expected)
    assert sorted(p.name for p in one.iterdir()) == written
    for name in written:
        _assert_same_file_contents(one / name, two / name)
    assert set(open_reference(one / "r.safetensors").variants) == ({variant} if variant else set())
    _assert_bitwise_equal(_state(model, opt), trained_by_two)
    assert _state(model, opt)["param.fc1.weight"].dtype == torch.float32


def test_reference_variants_false_is_record_references_variants_false(tmp_path):
    model, opt, batches = _loop("adam")
    two = record_reference(model, opt, batches, tmp_path / "two.safetensors", steps=STEPS, variants=False)
    model, opt, batches = _loop("adam")
    record(model, opt, batches, tmp_path / "t.safetensors", steps=STEPS, reference=tmp_path / "one.safetensors",
           reference_variants=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.safetensors", "t.safetensors", "two.safetensors"]
    _assert_same_file_contents(tmp_path / "one.safetensors", two)
    assert not open_reference(tmp_path / "one.safetensors").variants


def test_the_reference_runs_are_parts_of_the_calls_progress(tmp_path):
    calls = []
    model, opt, batches = _loop("adam")
    record(model, opt, batches, tmp_path / "t.safetensors", steps=STEPS, reference=tmp_path / "r.safetensors",
           progress=lambda done, total, part=None: calls.append((part, done, total)))
    parts = ["float64 reference, burn-adam variant", "float64 reference", None]
    assert calls == [(part, k, STEPS) for part in parts for k in range(STEPS + 1)]


@pytest.mark.parametrize(("path", "reference", "what"), [
    ("t.safetensors", "t.safetensors", "reference="),
    ("t.safetensors", "sub/../t.safetensors", "reference="),
    ("r.burn-adam.safetensors", "r.safetensors", "the variant file of reference={reference}"),
])
def test_a_reference_on_the_traces_file_is_refused_in_one_line_before_anything(tmp_path, path, reference, what):
    (tmp_path / "sub").mkdir()
    model, opt, batches = _loop("adam")
    untrained = _state(model, opt)
    with pytest.raises(BurnsideError) as raised:
        record(model, opt, batches, tmp_path / path, steps=STEPS, reference=tmp_path / reference)
    what = what.format(reference=tmp_path / reference)
    stem = path.removesuffix(".safetensors")
    assert str(raised.value) == (f"path and {what} are the same file ({tmp_path / path}): give the trace and the "
                                 f"float64 reference a file each, e.g. reference={stem}.reference.safetensors")
    assert "\n" not in str(raised.value)
    assert [p.name for p in tmp_path.iterdir()] == ["sub"]
    _assert_bitwise_equal(_state(model, opt), untrained)


def test_a_refused_reference_trains_nothing_writes_nothing_and_keeps_an_earlier_reference(tmp_path):
    model, opt, batches = _loop("adam")
    earlier = record_reference(model, opt, batches, tmp_path / "r.safetensors", steps=STEPS)
    kept = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert sorted(kept) == ["r.burn-adam.safetensors", "r.safetensors"]

    opt.register_step_pre_hook(lambda optimizer, args, kwargs: None)
    untrained = _state(model, opt)
    with pytest.raises(BurnsideError, match=r"1 step hook\(s\), which a float64 re-run cannot carry over"):
        record(model, opt, batches, tmp_path / "t.safetensors", steps=STEPS, reference=earlier)
    _assert_bitwise_equal(_state(model, opt), untrained)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == kept  # no trace; the files it did not write kept


def test_a_trace_that_fails_after_its_reference_deletes_the_reference_files_it_wrote(tmp_path):
    """A forward whose float32 logits it rounds to float8: the float64 reference's stay float64 and record, the
    trace refuses its float8 logits (a trace holds no float8)."""
    model, opt, batches = _loop("adam")

    def forward(m, b):
        logits = m(b["x"])
        return logits if logits.dtype == torch.float64 else logits.to(torch.float8_e4m3fn)

    (tmp_path / "r.safetensors").write_bytes(b"an earlier file, overwritten by this call's reference")
    calls = []
    with pytest.raises(BurnsideError, match="a torch.float8_e4m3fn tensor cannot be recorded"):
        record(model, opt, batches, tmp_path / "t.safetensors", steps=STEPS, reference=tmp_path / "r.safetensors",
               forward=forward, loss_fn=lambda logits, y: torch.nn.functional.cross_entropy(logits.double(), y),
               progress=lambda done, total, part=None: calls.append((part, done, total)))
    # both reference runs finished (so their files were written) before the trace began
    assert ("float64 reference, burn-adam variant", STEPS, STEPS) in calls
    assert ("float64 reference", STEPS, STEPS) in calls and (None, 0, STEPS) in calls
    assert list(tmp_path.iterdir()) == []
    assert not opt.state  # refused at step 0's logits, before any step

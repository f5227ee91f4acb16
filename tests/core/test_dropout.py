"""Dropout: a random mask per framework, so a parity check runs with it off; the recorder turns it off for the
recording only (unless asked not to), the reference refuses dropout that is on, and a dropout where the two
sides part is named (D013)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from burnside.pipeline import compare_with_evidence
from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.recording.reference import record_reference
from burnside.torch import record
from burnside.trace import open_trace, write_trace


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.drop, self.fc2 = torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2)
        self.attn = torch.nn.MultiheadAttention(2, 1, dropout=0.5, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(self.drop(self.fc1(x))).unsqueeze(1)
        return self.attn(h, h, h, need_weights=False)[0].squeeze(1)


def _record(path, mask_seed: int, **kwargs):
    torch.manual_seed(0)
    model = _Net()
    batch = {"x": torch.randn(16, 4), "y": torch.randint(0, 2, (16,))}
    torch.manual_seed(mask_seed)
    return model, (record_reference if kwargs.pop("reference", False) else record)(
        model, torch.optim.SGD(model.parameters(), lr=0.1), batch, path, steps=2, **kwargs)


def test_dropout_is_off_for_the_recording_only_and_runs_repeat(tmp_path):
    model, one = _record(tmp_path / "one.safetensors", 1)
    assert model.drop.training and model.attn.dropout == 0.5, "restored after the recording"
    _, two = _record(tmp_path / "two.safetensors", 2)
    assert open_trace(one).metadata["dropout"] == "off"
    assert compare_with_evidence(open_trace(one), open_trace(two)).passed, "no random mask left: other seeds agree"
    _, on = _record(tmp_path / "on.safetensors", 1, dropout=True)
    assert open_trace(on).metadata["dropout"] == "on: drop (p=0.5), attn (attention dropout 0.5)"


def test_the_reference_refuses_dropout_that_is_on(tmp_path):
    with pytest.raises(BurnsideError, match=r"dropout is on \(drop \(p=0.5\), attn \(attention dropout 0.5\)\)"):
        _record(tmp_path / "r.safetensors", 1, reference=True, dropout=True)
    assert not (tmp_path / "r.safetensors").exists()
    _record(tmp_path / "r.safetensors", 1, reference=True)


def test_a_side_with_its_dropout_on_is_named_not_blamed_on_the_forward(tmp_path):
    # the PyTorch side recorded with dropout on, the port's off: named at whatever forward row parts first
    _, on = _record(tmp_path / "on.safetensors", 1, dropout=True)
    _, off = _record(tmp_path / "off.safetensors", 2)
    found = {d.rule: d for d in diagnose(compare_with_evidence(open_trace(on), open_trace(off)))}
    assert "D013" in found and "D010" not in found, sorted(found)
    assert found["D013"].evidence.startswith("A (pytorch) was recorded with its dropout on (drop (p=0.5), attn")
    assert "drop `dropout=True`" in found["D013"].fix
    # the port's dropout on (a burn trace says nothing of dropout): named at the dropout layer itself
    port = open_trace(on)
    relabeled = write_trace(tmp_path / "port.safetensors", {n: np.asarray(port.array(n)) for n in port.names},
                            {k: v for k, v in port.metadata.items() if k != "dropout"} | {"framework": "burn"})
    comparison = compare_with_evidence(open_trace(off), open_trace(relabeled))
    assert comparison.first_divergence.name == "step0.activations.drop"
    found = {d.rule: d for d in diagnose(comparison)}
    assert "D013" in found and "D010" not in found, sorted(found)
    assert "while its input, step0.activations.fc1, agrees" in found["D013"].evidence
    assert "the PyTorch side was recorded with dropout off, so the other side's dropout is on" in found["D013"].evidence
    assert "DropoutConfig::new(0.0)" in found["D013"].fix

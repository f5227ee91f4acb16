"""A training port that loads the init file's LSTM or GRU weights into its gates in another order starts from
A's values, permuted. D006 used to say only that the initial parameters differ, with a fix about rounding
inputs in f64; D014 names the order found and the fix, as it does for a forward trace.

Both sides are real PyTorch trainings of one recurrent classifier; side B, marked as burn's, starts from the
same weights with two gate blocks of one tensor swapped, as a port that cuts the stacked tensor wrongly would.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from tests.diagnose.forward_traces import as_burn


class Recurrent(nn.Module):
    def __init__(self, cell: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = cell(4, 6, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def _diagnoses(tmp_path, cell, swap: tuple[int, int] | None):
    torch.manual_seed(0)
    model = Recurrent(cell)
    batch = {"x": torch.randn(5, 7, 4), "y": torch.randint(0, 3, (5,))}
    port = copy.deepcopy(model)
    if swap is not None:
        with torch.no_grad():
            w = port.rnn.weight_ih_l0
            h = w.shape[0] // (4 if cell is nn.LSTM else 3)
            i, j = swap
            rows_i, rows_j = w[i * h:(i + 1) * h].clone(), w[j * h:(j + 1) * h].clone()
            w[i * h:(i + 1) * h], w[j * h:(j + 1) * h] = rows_j, rows_i
    a = record(model, torch.optim.Adam(model.parameters(), lr=1e-2), batch, tmp_path / "a.safetensors", steps=2)
    b = record(port, torch.optim.Adam(port.parameters(), lr=1e-2), batch, tmp_path / "b.safetensors", steps=2)
    return {d.rule: d for d in diagnose(compare_with_evidence(a, as_burn(b)))}


@pytest.mark.parametrize(("cell", "swap", "order"), [(nn.LSTM, (1, 2), "i,g,f,o"), (nn.GRU, (0, 1), "z,r,n")])
def test_gates_loaded_in_another_order_are_named_with_the_order(tmp_path, cell, swap, order):
    found = _diagnoses(tmp_path, cell, swap)
    assert "D014" in found, found
    d014 = found["D014"]
    assert "rnn.weight_ih_l0: B holds A" in d014.evidence and f"gate order {order}" in d014.evidence, \
        d014.evidence
    assert "in PyTorch's order" in d014.fix, d014.fix
    assert "D006" not in found, found["D006"].evidence


def test_weights_that_differ_otherwise_are_still_d006(tmp_path):
    torch.manual_seed(0)
    model = Recurrent(nn.LSTM)
    batch = {"x": torch.randn(5, 7, 4), "y": torch.randint(0, 3, (5,))}
    port = copy.deepcopy(model)
    with torch.no_grad():
        port.rnn.weight_ih_l0.mul_(1 + 2 ** -20)  # a rounding-sized change, not a permutation
    a = record(model, torch.optim.Adam(model.parameters(), lr=1e-2), batch, tmp_path / "a.safetensors", steps=2)
    b = record(port, torch.optim.Adam(port.parameters(), lr=1e-2), batch, tmp_path / "b.safetensors", steps=2)
    found = {d.rule: d for d in diagnose(compare_with_evidence(a, as_burn(b)))}
    assert "D006" in found and "D014" not in found, found


def test_a_correct_port_gets_no_diagnosis(tmp_path):
    assert _diagnoses(tmp_path, nn.LSTM, None) == {}

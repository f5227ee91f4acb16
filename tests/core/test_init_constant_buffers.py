"""An init file made from a training trace carries the trace's constant buffers (persistent, never changed by the
run: a tutorial's positional table) as `buffers.*`, listed as `constant_buffers`, so a port may read them with
`InitFile::buffer` (burnside-trace leaves those its module has no place for unused when it loads the rest); a
buffer the run changes (a running mean of the model's own) is state, not carried."""

from __future__ import annotations

import torch
from torch import nn

from burnside.burn.port import init_from_trace
from burnside.torch import record
from burnside.trace import open_trace


class Positional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("pe", torch.arange(4.0) / 4)  # persistent, constant
        self.register_buffer("seen", torch.zeros(4))  # persistent, changed by every forward pass

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add_(x.detach().mean(0))
        return self.fc(x + self.pe)


def test_a_training_init_file_carries_the_constant_buffers_only(tmp_path):
    torch.manual_seed(0)
    model = Positional()
    batches = [{"x": torch.randn(2, 4), "y": torch.tensor([0, 2])} for _ in range(2)]
    trace = record(model, torch.optim.SGD(model.parameters(), lr=0.1), batches, tmp_path / "t.safetensors", steps=2)
    init = open_trace(init_from_trace(open_trace(trace), tmp_path / "init.safetensors"), kind="init")
    assert init.metadata["constant_buffers"] == ["pe"]
    assert [n for n in init.names if n.startswith("buffers.")] == ["buffers.pe"]
    assert init.array("buffers.pe").tolist() == [0.0, 0.25, 0.5, 0.75]

"""The PyTorch side of an inference port: the checkpoint the burn port loads, and the forward passes
it is checked against.

    python record.py   # writes checkpoint/model.pt, traces/torch.safetensors and traces/reference.safetensors

With a model of your own, load your trained weights here instead of making them (`model.load_state_dict(...)`),
and save the checkpoint your burn code loads in production (or point the port at it).
"""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record_forward
from model import Model

BATCHES = 2

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    torch.manual_seed(0)
    model = Model()
    with torch.no_grad():  # stands in for training: running statistics a fresh model does not have
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    (here / "checkpoint").mkdir(exist_ok=True)
    torch.save(model.state_dict(), here / "checkpoint" / "model.pt")
    batches = [{"x": torch.randn(8, 6)} for _ in range(BATCHES)]
    (here / "traces").mkdir(exist_ok=True)
    # model.eval() and torch.no_grad() while recording; every module's input and output, the outputs,
    # the weights and buffers as loaded. forward=lambda model, batch: ... for a model called otherwise.
    record_forward(model, batches, here / "traces" / "torch.safetensors",
                   reference=here / "traces" / "reference.safetensors")
    print(f"recorded {BATCHES} batches: {here / 'traces' / 'torch.safetensors'} (float64 reference beside it)")

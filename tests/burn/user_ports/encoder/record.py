"""The encoder's PyTorch side: the checkpoint its burn port loads (checkpoint/model.pt) and the forward
passes it is checked against, in eval mode (dropout off), with their float64 reference."""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record_forward
from model import MAX_LEN, VOCAB, Encoder

BATCHES = 2

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    torch.manual_seed(0)
    model = Encoder()  # stands in for the trained model: load_state_dict(torch.load(...)) in a real project
    (here / "checkpoint").mkdir(exist_ok=True)
    torch.save(model.state_dict(), here / "checkpoint" / "model.pt")
    batches = [{"ids": torch.randint(0, VOCAB, (4, MAX_LEN))} for _ in range(BATCHES)]
    (here / "traces").mkdir(exist_ok=True)
    record_forward(model, batches, here / "traces" / "torch.safetensors",
                   forward=lambda model, batch: model(batch["ids"]),
                   reference=here / "traces" / "reference.safetensors")
    print("recorded", here / "traces" / "torch.safetensors")

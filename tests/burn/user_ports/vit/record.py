"""The PyTorch side of the ViT inference port: checkpoint/model.pt, traces/torch.safetensors and
traces/reference.safetensors.  python record.py
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
    with torch.no_grad():  # "pretrained": non-trivial tokens, position embeddings and norm affines
        model.cls_token.normal_(0.0, 0.5)
        model.pos_embed.normal_(0.0, 0.5)
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            elif "norm" in name and name.endswith("bias"):
                p.uniform_(-0.2, 0.2)
    (here / "checkpoint").mkdir(exist_ok=True)
    torch.save(model.state_dict(), here / "checkpoint" / "model.pt")
    batches = [{"x": torch.randn(4, 3, 32, 32)} for _ in range(BATCHES)]
    (here / "traces").mkdir(exist_ok=True)
    record_forward(model, batches, here / "traces" / "torch.safetensors",
                   reference=here / "traces" / "reference.safetensors")
    print(f"recorded {BATCHES} batches: {here / 'traces' / 'torch.safetensors'} (float64 reference beside it)")

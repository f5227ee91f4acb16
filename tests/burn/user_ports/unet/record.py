"""Record the denoiser's PyTorch side (MSE, SGD with Nesterov momentum and weight decay, cosine schedule)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.nn import functional as F

from burnside.torch import record
from model import Model

STEPS = 3

if __name__ == "__main__":
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=True)
    batches = []
    for _ in range(STEPS):
        clean = torch.randn(4, 1, 8, 8)
        batches.append({"x": clean + 0.3 * torch.randn(4, 1, 8, 8), "y": clean})
    out = Path(__file__).resolve().parent / "traces"
    out.mkdir(exist_ok=True)
    record(model, optimizer, batches, out / "torch.safetensors", steps=STEPS, loss_fn=F.mse_loss,
           lr_schedule=lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS),
           reference=out / "reference.safetensors")
    print("recorded", out / "torch.safetensors")

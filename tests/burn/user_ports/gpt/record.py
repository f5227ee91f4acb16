"""Record the tiny GPT's PyTorch side and its float64 reference into traces/."""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record
from model import Model, T, VOCAB

STEPS = 2
LR, WARMUP = 1e-2, 3


def warmup(k: int) -> float:
    return min(1.0, (k + 1) / WARMUP)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Model()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LR, betas=(0.9, 0.95))
    batches = []
    for _ in range(STEPS):
        seq = torch.randint(0, VOCAB, (4, T + 1))
        batches.append({"x": seq[:, :-1].contiguous(), "y": seq[:, 1:].reshape(-1).contiguous()})
    out = Path(__file__).resolve().parent / "traces"
    out.mkdir(exist_ok=True)
    record(model, optimizer, batches, out / "torch.safetensors", steps=STEPS,
           clip_grad_norm=1.0,
           lr_schedule=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, warmup),
           reference=out / "reference.safetensors")
    print("recorded", out / "torch.safetensors")

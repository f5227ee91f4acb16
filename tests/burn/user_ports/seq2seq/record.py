"""Record the PyTorch side: the trace the burn port is checked against, and its float64 reference.

    python record.py            # writes traces/torch.safetensors and traces/reference*.safetensors
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.optim.lr_scheduler import LambdaLR

from burnside.torch import record
from model import D_MODEL, Seq2Seq, seq2seq_forward, seq2seq_loss

STEPS = 4
WARMUP = 4
BATCH, SRC_LEN, TGT_LEN = 4, 7, 6


def noam(s: int) -> float:
    step = max(s, 1)
    return D_MODEL ** -0.5 * min(step ** -0.5, step * WARMUP ** -1.5)


def make_batch(gen: torch.Generator) -> dict:
    src = torch.randint(3, 20, (BATCH, SRC_LEN), generator=gen)
    tgt = torch.randint(3, 20, (BATCH, TGT_LEN), generator=gen)
    for i, (ls, lt) in enumerate([(7, 6), (5, 4), (6, 5), (3, 2)]):   # trailing padding
        src[i, ls:] = 0
        tgt[i, lt:] = 0
    return {"src": src, "tgt": tgt}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Seq2Seq()
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    gen = torch.Generator().manual_seed(1)
    batches = [make_batch(gen) for _ in range(STEPS)]
    out = Path(__file__).resolve().parent / "traces"
    out.mkdir(exist_ok=True)
    record(model, optimizer, batches, out / "torch.safetensors", steps=STEPS,
           forward=seq2seq_forward, loss_fn=seq2seq_loss, target="tgt",
           lr_schedule=lambda opt: LambdaLR(opt, noam),
           reference=out / "reference.safetensors")
    print(f"recorded {STEPS} steps: {out / 'torch.safetensors'} (float64 reference beside it)")

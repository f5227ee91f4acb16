"""Record the PyTorch side: the trace the burn port is checked against, and its float64 reference.

    python record.py            # writes traces/torch.safetensors and traces/reference*.safetensors
"""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record
from model import Model

STEPS = 3

if __name__ == "__main__":
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # one batch per step, as a data loader gives them (or one batch, reused every step)
    batches = [{"x": torch.randn(16, 4), "y": torch.randint(0, 3, (16,))} for _ in range(STEPS)]
    out = Path(__file__).resolve().parent / "traces"
    out.mkdir(exist_ok=True)
    # loss_fn(model(batch["x"]), batch["y"]) is the loss; see help(burnside.torch.record) for
    # forward=, loss_fn=, clip_grad_norm=, lr_schedule= and the rest.
    record(model, optimizer, batches, out / "torch.safetensors", steps=STEPS,
           reference=out / "reference.safetensors")
    print(f"recorded {STEPS} steps: {out / 'torch.safetensors'} (float64 reference beside it)")

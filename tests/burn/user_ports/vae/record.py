"""Record the PyTorch side: the trace the burn port is checked against, and its float64 reference.

    python record.py            # writes traces/torch.safetensors and traces/reference*.safetensors
"""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record
from model import VAE, vae_loss

STEPS = 3
BATCH = 8

if __name__ == "__main__":
    torch.manual_seed(0)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    # one batch per step: images in [0, 1] and the reparameterization noise eps
    batches = [{"x": torch.rand(BATCH, 1, 16, 16), "eps": torch.randn(BATCH, 8)} for _ in range(STEPS)]
    out = Path(__file__).resolve().parent / "traces"
    out.mkdir(exist_ok=True)
    record(model, optimizer, batches, out / "torch.safetensors", steps=STEPS,
           forward=lambda m, b: m(b["x"], b["eps"]),
           loss_fn=vae_loss, target=None,
           reference=out / "reference.safetensors")
    print(f"recorded {STEPS} steps: {out / 'torch.safetensors'} (float64 reference beside it)")

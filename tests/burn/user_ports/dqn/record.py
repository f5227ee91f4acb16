"""Record the DQN update's PyTorch side: 3 RMSprop steps, one replay batch per step, the TD loss a module
holding the frozen target network (record's target=None: the loss of the Q-values and the whole batch)."""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record
from model import ACTIONS, OBS, QNet, TDLoss

STEPS = 3
BATCH = 16

if __name__ == "__main__":
    torch.manual_seed(0)
    model = QNet()
    loss_fn = TDLoss(model)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    batches = [{
        "obs": torch.randn(BATCH, OBS),
        "action": torch.randint(0, ACTIONS, (BATCH,)),
        "reward": torch.randn(BATCH),
        "next_obs": torch.randn(BATCH, OBS),
        "done": (torch.rand(BATCH) < 0.3).float(),
    } for _ in range(STEPS)]
    out = Path(__file__).resolve().parent / "traces"
    out.mkdir(exist_ok=True)
    record(model, optimizer, batches, out / "torch.safetensors", steps=STEPS,
           forward=lambda model, batch: model(batch["obs"]), loss_fn=loss_fn, target=None,
           reference=out / "reference.safetensors")
    print("recorded", out / "torch.safetensors")

"""The PyTorch side of the ResNet port: checkpoint/model.pt (torchvision's state_dict), traces/torch.safetensors
and traces/reference.safetensors.  python record.py
"""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record_forward
from model import build

BATCHES = 2

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    torch.manual_seed(0)
    model = build()
    with torch.no_grad():  # "pretrained": every BatchNorm's affine and running statistics away from 1 and 0
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
                module.running_mean.normal_(0.0, 0.3)
                module.running_var.uniform_(0.5, 2.0)
                module.num_batches_tracked.fill_(1000)
    model.eval()
    (here / "checkpoint").mkdir(exist_ok=True)
    torch.save(model.state_dict(), here / "checkpoint" / "model.pt")
    batches = [{"x": torch.randn(2, 3, 32, 32)} for _ in range(BATCHES)]
    (here / "traces").mkdir(exist_ok=True)
    record_forward(model, batches, here / "traces" / "torch.safetensors",
                   reference=here / "traces" / "reference.safetensors")
    print(f"recorded {BATCHES} batches: {here / 'traces' / 'torch.safetensors'} (float64 reference beside it)")

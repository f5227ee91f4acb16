"""The pretrained PyTorch model the burn port in src/main.rs reproduces for inference. Replace it with yours."""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.bn = nn.BatchNorm1d(16)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.act(self.bn(self.fc1(x)))))

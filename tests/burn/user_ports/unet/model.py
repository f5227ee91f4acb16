"""A small UNet-style denoiser: conv, GroupNorm, PReLU, a strided down conv, InstanceNorm, ConvTranspose up,
skip concat."""

from __future__ import annotations

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inc = nn.Conv2d(1, 8, 3, padding=1)
        self.gn1 = nn.GroupNorm(4, 8)
        self.act1 = nn.PReLU()            # one shared slope
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.inorm = nn.InstanceNorm2d(16, affine=True)
        self.act2 = nn.PReLU(16)          # a slope per channel
        self.up = nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1)
        self.gn2 = nn.GroupNorm(2, 8)
        self.outc = nn.Conv2d(16, 1, 3, padding=1)

    def forward(self, x):
        h1 = self.act1(self.gn1(self.inc(x)))
        h2 = self.act2(self.inorm(self.down(h1)))
        u = self.gn2(self.up(h2))
        return self.outc(torch.cat([u, h1], dim=1))

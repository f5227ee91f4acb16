"""A small Vision Transformer classifier (3x32x32 images, 8x8 patches, 2 pre-norm blocks, 4 heads).

Attention is written by hand with one packed qkv Linear (timm style), so the burn port can mirror it
layer for layer, and the attention scale is an explicit number.
"""

from __future__ import annotations

import torch
from torch import nn

DIM, HEADS, MLP, DEPTH, CLASSES, PATCH, IMG = 64, 4, 128, 2, 10, 8, 32
TOKENS = (IMG // PATCH) ** 2 + 1


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = HEADS
        self.head_dim = DIM // HEADS
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                      # [b, heads, n, head_dim]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(DIM, MLP)
        self.act = nn.GELU()          # exact (erf)
        self.fc2 = nn.Linear(MLP, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM, eps=1e-6)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(DIM, eps=1e-6)
        self.mlp = Mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, DIM, kernel_size=PATCH, stride=PATCH)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos_embed = nn.Parameter(torch.zeros(1, TOKENS, DIM))
        self.blocks = nn.ModuleList([Block() for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(DIM, eps=1e-6)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)                   # [b, 64, 4, 4]
        x = x.flatten(2).transpose(1, 2)          # [b, 16, 64]
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(x[:, 0])

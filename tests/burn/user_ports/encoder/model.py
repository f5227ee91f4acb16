"""A pretrained text encoder: token embedding plus learned positions, two post-norm
`nn.TransformerEncoderLayer`s (d_model 32, 4 heads, feed-forward 64, ReLU, dropout 0.1, batch first), a
final LayerNorm and a Linear head over each position."""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 50
MAX_LEN = 16
D_MODEL = 32
CLASSES = 5


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(MAX_LEN, D_MODEL)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True,
                                       norm_first=False)
            for _ in range(2)
        ])
        self.norm = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, CLASSES)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok(ids) + self.pos(positions)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))

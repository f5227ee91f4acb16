"""A small transformer block trained with AdamW.

Embedding -> LayerNorm -> single-head attention (Linear q/k/v/o) -> residual -> LayerNorm ->
MLP (Linear, GELU, Linear) -> residual -> mean over the sequence -> Linear head. The burn port
is rust/transformer (bin ``transformer``). The attention projections have no bias, as in most
transformer code; a key bias in particular adds the same score to every key, which softmax
cancels, so its gradient is rounding noise that AdamW blows up to learning-rate-sized moves.
Measured with biases on q/k/v/o on both sides (4 steps, lr 0.01): the key bias gradients differ
by 5e-10, ``params_after.attn.k.bias`` by 4.9e-4 after one step and 1.1e-3 after four, which
reaches ``activations.attn.k`` (1.05e-3) but not the attention output or the logits (within
1e-5, checked at steps 0 and 3).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.examples import record_example

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: The port's binary (crate rust/transformer).
BURN_BIN = "transformer"
VOCAB, D_MODEL, D_HIDDEN, CLASSES = 16, 16, 32, 3
#: AdamW's learning rate on both sides (weight decay is PyTorch's default, 0.01).
LR = 0.01


class Attention(nn.Module):
    """Single-head scaled dot-product self-attention."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.k = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.v = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.o = nn.Linear(D_MODEL, D_MODEL, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = q @ k.transpose(1, 2) / math.sqrt(D_MODEL)
        return self.o(scores.softmax(dim=2) @ v)


class Mlp(nn.Module):
    """Linear, GELU (exact), Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(D_MODEL, D_HIDDEN)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(D_HIDDEN, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Token ids [batch, seq] in, class logits [batch, 3] out."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D_MODEL)
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.attn = Attention()
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.mlp = Mlp()
        self.head = nn.Linear(D_MODEL, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens)
        h = h + self.attn(self.ln1(h))
        h = h + self.mlp(self.ln2(h))
        return self.head(h.mean(dim=1))


def model_and_batch() -> tuple[Block, dict[str, torch.Tensor]]:
    """The model with seeded weights and one seeded batch of 4 sequences of 8 tokens."""
    torch.manual_seed(0)
    model = Block()
    x = torch.randint(0, VOCAB, (4, 8))
    y = torch.randint(0, CLASSES, (4,))
    return model, {"x": x, "y": y}


def record_torch(path: Path, *, steps: int, reference: bool = False, progress: StepProgress | None = None) -> Path:
    """Train ``steps`` AdamW steps on one batch and write the trace to ``path``; with ``reference``, the
    same training in float64 from the same start (the referee of `compare --reference`); ``progress`` is
    told the steps done."""
    model, batch = model_and_batch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    return record_example("transformer", model, optimizer, batch, path, steps=steps, reference=reference,
                          progress=progress)

"""A small text encoder trained with AdamW: Embedding -> nn.MultiheadAttention (4 heads) -> residual ->
LayerNorm -> mean over the sequence -> Linear head.

The burn port is rust/attention (bin ``attention``). ``nn.MultiheadAttention`` keeps its query, key and value
projections packed in one ``in_proj_weight`` (``[3 * d_model, d_model]``) and ``in_proj_bias``, and its output
projection as ``out_proj``; burn's ``MultiHeadAttention`` has one ``Linear`` each (``query``, ``key``, ``value``,
``output``). burnside-trace cuts and stacks them, so the port declares nothing. The layer here is
``batch_first=True`` (``[batch, seq, d_model]``, as burn's), and its dropout is PyTorch's default, 0.
The learning rate warms up linearly over the first two steps (a ``LambdaLR`` schedule; the port passes each
step's rate to ``optim.step`` and records it with ``recorder.lr``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.examples import record_example

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: The port's binary (crate rust/attention).
BURN_BIN = "attention"
VOCAB, D_MODEL, HEADS, CLASSES = 16, 16, 4, 3
#: AdamW's learning rate on both sides (weight decay is PyTorch's default, 0.01), reached after WARMUP steps.
LR = 0.01
WARMUP = 2


def warmup(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule: ``LR * min(1, (k + 1) / WARMUP)`` at step k."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: min(1.0, (k + 1) / WARMUP))


class Encoder(nn.Module):
    """Token ids [batch, seq] in, class logits [batch, 3] out."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D_MODEL)
        self.attn = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
        self.ln = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens)
        attended, _ = self.attn(h, h, h, need_weights=False)
        return self.head(self.ln(h + attended).mean(dim=1))


def model_and_batch() -> tuple[Encoder, dict[str, torch.Tensor]]:
    """The model with seeded weights and one seeded batch of 4 sequences of 8 tokens."""
    torch.manual_seed(0)
    model = Encoder()
    x = torch.randint(0, VOCAB, (4, 8))
    y = torch.randint(0, CLASSES, (4,))
    return model, {"x": x, "y": y}


def record_torch(path: Path, *, steps: int, reference: bool = False, progress: StepProgress | None = None) -> Path:
    """Train ``steps`` AdamW steps on one batch and write the trace to ``path``; with ``reference``, the
    same training in float64 from the same start (the referee of `compare --reference`); ``progress`` is
    told the steps done."""
    model, batch = model_and_batch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    return record_example("attention", model, optimizer, batch, path, steps=steps, reference=reference,
                          progress=progress, lr_schedule=warmup)

"""A small recurrent language model trained with Adam: Embedding -> GRU -> bidirectional LSTM -> Linear.

The burn port is rust/rnn (bin ``rnn``). Both recurrent layers are as PyTorch builds them by default:
sequence-first (``[seq, batch, features]``), with both an input and a hidden bias, and their gates packed
into one ``weight_ih_l0`` / ``weight_hh_l0`` / ``bias_ih_l0`` / ``bias_hh_l0`` each (plus ``*_reverse`` for
the LSTM's backward direction). burn's ``Gru`` and ``BiLstm`` keep one pair of ``Linear`` layers per gate;
burnside-trace cuts PyTorch's packed tensors into them on loading and stacks gradients, values and Adam's
moments back when recording, so the two traces carry the same names.

The loop clips gradients as language models do, ``clip_grad_norm_`` at 0.2, where this small model's
gradient norm is 0.24, 0.22, 0.21 and 0.204 over the first four steps and 0.195 after: clipping scales the
gradients of steps 0 to 3 and leaves step 4's alone. burn has no clipping by the norm of all gradients
together (its ``GradientClippingConfig::Norm`` clips each tensor by its own norm); the port clips with
burnside-trace's ``ClipGradNorm``, and declares it on the recorder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.examples import record_example

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: The port's binary (crate rust/rnn).
BURN_BIN = "rnn"
VOCAB, D_EMB, D_HIDDEN, SEQ, BATCH = 12, 8, 16, 6, 4
#: Adam's learning rate on both sides.
LR = 0.01
#: ``torch.nn.utils.clip_grad_norm_``'s max_norm on both sides.
CLIP = 0.2


class CharRnn(nn.Module):
    """Token ids ``[seq, batch]`` in, next-token logits ``[seq * batch, vocab]`` out."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D_EMB)
        self.gru = nn.GRU(D_EMB, D_HIDDEN)
        self.lstm = nn.LSTM(D_HIDDEN, D_HIDDEN, bidirectional=True)
        self.head = nn.Linear(2 * D_HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens)
        h, _ = self.gru(h)
        h, _ = self.lstm(h)
        return self.head(h).flatten(0, 1)


def model_and_batch() -> tuple[CharRnn, dict[str, torch.Tensor]]:
    """The model with seeded weights and one seeded batch: 4 sequences of 6 tokens and the token after each."""
    torch.manual_seed(0)
    model = CharRnn()
    tokens = torch.randint(0, VOCAB, (SEQ + 1, BATCH))
    return model, {"x": tokens[:-1], "y": tokens[1:].flatten()}


def record_torch(path: Path, *, steps: int, reference: bool = False, progress: StepProgress | None = None) -> Path:
    """Train ``steps`` Adam steps with clipping on one batch and write the trace to ``path``; with ``reference``, the
    same training in float64 from the same start (the referee of `compare --reference`); ``progress`` is
    told the steps done."""
    model, batch = model_and_batch()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    return record_example("rnn", model, optimizer, batch, path, steps=steps, reference=reference,
                          progress=progress, clip_grad_norm=CLIP)

"""A small CNN trained with Adam: Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d -> Linear.

The burn port is rust/cnn (bin ``cnn``). The conv has no bias, as is usual before a
training-mode BatchNorm: the normalization cancels it, so its gradient is rounding noise that
Adam turns into learning-rate-sized moves that differ between the two frameworks. Measured
with ``bias=True`` on both sides (4 steps, lr 0.01): the conv bias gradients differ by 3.9e-8,
``params_after.conv.bias`` by 0.011 after one step and 0.033 after four, which reaches
``activations.conv`` (0.026) and ``buffers.bn.running_mean`` (0.005) but not the BatchNorm
output, the logits or the loss (within 1e-5, checked at steps 0 and 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.examples import record_example

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: The port's binary (crate rust/cnn).
BURN_BIN = "cnn"
#: Adam's learning rate on both sides.
LR = 0.01


class Cnn(nn.Module):
    """2 channels of 8x8 in, 3 classes out."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(64, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.bn(self.conv(x))))
        return self.fc(x.flatten(1))


def model_and_batch() -> tuple[Cnn, dict[str, torch.Tensor]]:
    """The model with seeded weights and one seeded batch of 8 images (512 elements per channel)."""
    torch.manual_seed(0)
    model = Cnn()
    x = torch.randn(8, 2, 8, 8)
    y = torch.randint(0, 3, (8,))
    return model, {"x": x, "y": y}


def model_and_batches(steps: int) -> tuple[Cnn, list[dict[str, torch.Tensor]]]:
    """The model and a batch per step, as a data loader gives them: step 0's is `model_and_batch`'s,
    the others drawn after it from the same seed."""
    model, first = model_and_batch()
    rest = [{"x": torch.randn(8, 2, 8, 8), "y": torch.randint(0, 3, (8,))} for _ in range(steps - 1)]
    return model, [first, *rest]


def record_torch(path: Path, *, steps: int, reference: bool = False, progress: StepProgress | None = None,
                 per_step: bool = False) -> Path:
    """Train ``steps`` Adam steps on one batch (``per_step``: a new batch each step) and write the trace to
    ``path``; with ``reference``, the same training in float64 from the same start (the referee of
    `compare --reference`); ``progress`` is told the steps done."""
    model, batches = model_and_batches(steps) if per_step else model_and_batch()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    return record_example("cnn", model, optimizer, batches, path, steps=steps, reference=reference,
                          progress=progress)

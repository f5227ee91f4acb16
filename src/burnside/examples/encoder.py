"""A pretrained audio-style encoder checked for inference: Conv1d over mel bands -> BatchNorm1d -> GELU ->
GRU over time -> the last time step -> LayerNorm -> Linear, in eval mode.

The burn port is rust/encoder (bin ``encoder``). It loads the checkpoint this side saves, ``encoder.pt``
(``torch.save(model.state_dict(), ...)``, next to the trace), through burn-store as production code
does, and runs the forward passes on a device without autodiff. The GRU is PyTorch's: its three gates
packed into ``gru.weight_ih_l0`` / ``weight_hh_l0`` / ``bias_ih_l0`` / ``bias_hh_l0`` (reset, update,
new), batch-first here, which burn's ``Gru`` (one ``Linear`` pair per gate, batch-first) holds apart.

Between the layers the tensor is reshaped as such models do: the conv's ``[batch, channels, time]``
transposed to ``[batch, time, channels]`` for the GRU, and only the GRU's last time step goes on, so each
layer's own input is what the trace's ``layer_inputs`` hold, not the previous layer's output.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.examples import record_pretrained

from burnside.examples.classifier import pretrain_batchnorm

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: The port's binary (crate rust/encoder).
BURN_BIN = "encoder"
#: The checkpoint's file name, next to the PyTorch trace.
CHECKPOINT = "encoder.pt"
N_MELS, CHANNELS, CLASSES = 8, 32, 5
#: One batch: 4 clips of 8 mel bands by 20 frames.
BATCH_SHAPE = (4, N_MELS, 20)


class Encoder(nn.Module):
    """``[batch, 8 mel bands, time]`` in, ``[batch, 5]`` logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(N_MELS, CHANNELS, 3, padding=1)
        self.bn = nn.BatchNorm1d(CHANNELS)
        self.gelu = nn.GELU()
        self.gru = nn.GRU(CHANNELS, CHANNELS, batch_first=True)
        self.ln = nn.LayerNorm(CHANNELS)
        self.head = nn.Linear(CHANNELS, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.gelu(self.bn(self.conv(x)))  # [batch, channels, time]
        h, _ = self.gru(h.transpose(1, 2))  # [batch, time, channels]
        return self.head(self.ln(h[:, -1]))


def pretrained() -> Encoder:
    """The encoder as its checkpoint holds it: seeded weights, trained BatchNorm state and LayerNorm affine
    parameters moved off 1 and 0, in eval mode."""
    torch.manual_seed(0)
    model = Encoder()
    pretrain_batchnorm(model, seed=1)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        model.ln.weight.copy_(1 + 0.2 * torch.randn(CHANNELS, generator=generator))
        model.ln.bias.copy_(0.1 * torch.randn(CHANNELS, generator=generator))
    return model.eval()


def batches(count: int) -> list[dict[str, torch.Tensor]]:
    """``count`` seeded batches of log-mel-like features, ``{"x": [4, 8, 20]}`` each."""
    generator = torch.Generator().manual_seed(2)
    return [{"x": torch.randn(*BATCH_SHAPE, generator=generator)} for _ in range(count)]


def record_torch(path: Path, *, steps: int, reference: bool = False, progress: StepProgress | None = None) -> Path:
    """Save the checkpoint next to ``path`` (`CHECKPOINT`) and record eval-mode forward passes over ``steps``
    batches at ``path``; with ``reference``, the same passes by a float64 copy (`record_pretrained`)."""
    return record_pretrained("encoder", pretrained(), Path(path).parent / CHECKPOINT, batches(steps), path,
                             reference=reference, progress=progress)

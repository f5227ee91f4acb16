"""A pretrained image classifier checked for inference: Conv2d -> BatchNorm2d -> ReLU -> Conv2d (stride 2) ->
BatchNorm2d -> ReLU -> AdaptiveAvgPool2d -> Dropout -> Linear, in eval mode.

The burn port is rust/classifier (bin ``classifier``). It loads the checkpoint this side saves,
``classifier.pt`` (``torch.save(model.state_dict(), ...)``, next to the trace), with burn-store's
``PytorchStore``, as production code loads a trained model, and runs the forward passes on a device
without autodiff. Nothing is taken from the init file but the batches: what the port loaded is checked
against the trace's ``step0.params_before.*`` and ``step0.buffers.*``.

"Pretrained" here: seeded weights, then BatchNorm affine parameters and running statistics as training
leaves them (``weight`` near 1, ``bias`` near 0, ``running_mean`` / ``running_var`` of a data set other
than these batches, ``num_batches_tracked`` counting the batches seen), drawn from a seeded generator so
that the running statistics differ clearly both from fresh ones (0 and 1) and from any batch's own: a
BatchNorm that normalizes with batch statistics, or with fresh ones, computes something else.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.examples import record_pretrained

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: The port's binary (crate rust/classifier).
BURN_BIN = "classifier"
#: The checkpoint's file name, next to the PyTorch trace.
CHECKPOINT = "classifier.pt"
#: One batch: 8 RGB images of 16x16.
BATCH_SHAPE = (8, 3, 16, 16)
CLASSES = 10


class Classifier(nn.Module):
    """``[batch, 3, 16, 16]`` images in, ``[batch, 10]`` class logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(32, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.bn2(self.conv2(x)))
        x = self.pool(x).flatten(1)
        return self.fc(self.dropout(x))


def pretrain_batchnorm(model: nn.Module, seed: int) -> None:
    """Give every BatchNorm of ``model`` the state a training run leaves, from a generator seeded with ``seed``:
    affine parameters moved off 1 and 0, running statistics of another data set (means of a few tenths,
    variances between 0.3 and 2.3), and ``num_batches_tracked`` = 500."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                n = module.num_features
                module.weight.copy_(1 + 0.2 * torch.randn(n, generator=generator))
                module.bias.copy_(0.1 * torch.randn(n, generator=generator))
                module.running_mean.copy_(0.5 * torch.randn(n, generator=generator))
                module.running_var.copy_(0.3 + 2 * torch.rand(n, generator=generator))
                module.num_batches_tracked.fill_(500)


def pretrained() -> Classifier:
    """The classifier as its checkpoint holds it: seeded weights and trained BatchNorm state, in eval mode."""
    torch.manual_seed(0)
    model = Classifier()
    pretrain_batchnorm(model, seed=1)
    return model.eval()


def batches(count: int) -> list[dict[str, torch.Tensor]]:
    """``count`` seeded batches of images, ``{"x": [8, 3, 16, 16]}`` each."""
    generator = torch.Generator().manual_seed(2)
    return [{"x": torch.randn(*BATCH_SHAPE, generator=generator)} for _ in range(count)]


def record_torch(path: Path, *, steps: int, reference: bool = False, progress: StepProgress | None = None) -> Path:
    """Save the checkpoint next to ``path`` (`CHECKPOINT`) and record eval-mode forward passes over ``steps``
    batches at ``path``; with ``reference``, the same passes by a float64 copy (`record_pretrained`)."""
    return record_pretrained("classifier", pretrained(), Path(path).parent / CHECKPOINT, batches(steps), path,
                             reference=reference, progress=progress)

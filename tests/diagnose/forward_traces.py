"""Forward traces for the diagnosis tests, recorded from real PyTorch forward passes.

Side A is `burnside.torch.record_forward`'s trace of a PyTorch model (layer inputs, activations,
modules). Side B stands for a burn port: the same recorder run over PyTorch code that carries the
port's fault (a BatchNorm in training mode, another epsilon), then written as a burn port's trace
is: no `layer_inputs`, no `modules` (a port taps under PyTorch's module paths), framework burn,
`mode` `inference` or `autodiff`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from burnside.torch import record_forward
from burnside.trace import open_trace, write_trace

Batch = Mapping[str, torch.Tensor]


def lr_from_step_1(model: nn.Module, optimizer: torch.optim.Optimizer, lr: float) -> None:
    """From the second forward pass on, ``optimizer``'s learning rate is ``lr``: a port's schedule the PyTorch loop
    does not have, set by hand (never declared: the trace's optimizer says the first rate)."""
    calls: list[int] = []

    def later(*_) -> None:
        calls.append(1)
        if len(calls) > 1:
            optimizer.param_groups[0]["lr"] = lr
    model.register_forward_pre_hook(later)


def as_burn(path: Path) -> Path:
    """Mark the training trace at ``path`` as a burn port's (framework burn), in place: its tensors, statistics and
    metadata as they are otherwise."""
    trace = open_trace(path)
    tensors = {n: np.array(trace.array(n)) for n in trace.names}
    write_trace(path, tensors, trace.metadata | {"framework": "burn", "framework_version": "0.22.1"},
                statistics=trace.statistics)
    return path


class BurnDropout(nn.Module):
    """burn's Dropout on an autodiff device: on whatever the recorder does to PyTorch's dropouts."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, training=True)


def torch_side(model: nn.Module, batches: Sequence[Batch], path: Path, **kwargs) -> Path:
    """PyTorch's forward trace, as `record_forward` writes it (eval mode unless ``eval=False``)."""
    return record_forward(model, batches, path, **kwargs)


def burn_side(model: nn.Module, batches: Sequence[Batch], path: Path, *, mode: str = "inference",
              float64: bool = False, eval: bool = True, forward: Callable | None = None) -> Path:  # noqa: A002
    """A burn port's forward trace, computed by ``model`` as given (``eval=False``: its modes left as set).

    ``float64``: a float64 copy of the model runs on float64 inputs and its tensors are written rounded
    to float32, a correct port whose sums round differently.
    """
    if float64:
        model = copy.deepcopy(model).double()
        batches = [{n: t.double() if t.is_floating_point() else t for n, t in b.items()} for b in batches]
    kwargs = {"forward": forward} if forward is not None else {}
    record_forward(model, batches, path, eval=eval, layer_inputs=False, **kwargs)
    trace = open_trace(path)
    tensors = {}
    for name in trace.names:
        value = np.array(trace.array(name))
        tensors[name] = value.astype(np.float32) if value.dtype == np.float64 else value
    metadata = {k: v for k, v in trace.metadata.items() if k not in ("modules", "layer_inputs")}
    metadata |= {"framework": "burn", "framework_version": "0.22.1", "mode": mode, "dtype": "float32"}
    path.unlink()
    return write_trace(path, tensors, metadata)

"""The loss call inside a training step's loss: which `torch.nn.functional` loss computed it, on what, with what.

A loss of the model's output and the whole batch (a TD target from a target network, a masked or gathered
output) hands its last loss function tensors that are neither the logits nor a batch key. Watching the
computation with a `TorchFunctionMode` finds the one `torch.nn.functional` loss call whose result is the
loss (`F.smooth_l1_loss(q.gather(1, a), td_target, beta=1.0)`): its input and target are recorded as
`step{k}.loss_inputs.input` / `.target` (aliases of the logits and the batch's target where they are those
very tensors) and its settings as metadata `loss_call`, so the diagnosis can tell which loss the port
computed from the inputs PyTorch's loss saw. A loss that is no single such call (a sum of two losses, a
hand-written reduction) records nothing: the diagnosis then has only the logits and the target.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

#: The loss functions watched, and the settings of each recorded in `loss_call` (the scalar ones).
_WATCHED: dict[Callable, str] = {
    F.cross_entropy: "cross_entropy",
    F.nll_loss: "nll_loss",
    F.mse_loss: "mse_loss",
    F.l1_loss: "l1_loss",
    F.smooth_l1_loss: "smooth_l1_loss",
    F.huber_loss: "huber_loss",
    F.binary_cross_entropy_with_logits: "binary_cross_entropy_with_logits",
    F.binary_cross_entropy: "binary_cross_entropy",
}
#: Arguments that are tensors of the call besides its input and target, recorded when given.
_TENSOR_SETTINGS = ("weight", "pos_weight")
#: Deprecated arguments every loss takes, folded into ``reduction`` by PyTorch itself: not settings.
_DEPRECATED = ("size_average", "reduce")


class LossCall(TorchFunctionMode):
    """Watches one loss computation (``with LossCall() as watch: loss = loss_fn(...)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict, torch.Tensor]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = _WATCHED.get(func)
        if name is not None and isinstance(out, torch.Tensor):
            try:
                bound = inspect.signature(func).bind(*args, **kwargs)
            except TypeError:
                return out
            bound.apply_defaults()
            self.calls.append((name, dict(bound.arguments), out))
        return out

    def found(self, loss: torch.Tensor) -> tuple[dict, dict[str, torch.Tensor]] | None:
        """(`loss_call` metadata, tensors by name) of the one watched call whose result is ``loss``, or None
        when the loss is no single watched call (several calls, a sum, a call of its own)."""
        matching = [(name, arguments) for name, arguments, out in self.calls
                    if out is loss or (out.shape == loss.shape and out.dtype == loss.dtype
                                       and bool(torch.equal(out.detach(), loss.detach())))]
        if len(matching) != 1 or len(self.calls) != 1:
            return None
        name, arguments = matching[0]
        values = list(arguments.values())
        tensors = {"input": values[0], "target": values[1]}
        if not all(isinstance(t, torch.Tensor) for t in tensors.values()):
            return None
        call: dict = {"fn": name}
        for key, value in list(arguments.items())[2:]:
            if key in _DEPRECATED or value is None:
                continue
            if key in _TENSOR_SETTINGS and isinstance(value, torch.Tensor):
                tensors[key] = value
            elif isinstance(value, bool) or isinstance(value, str):
                call[key] = value
            elif isinstance(value, (int, float)) and math.isfinite(value):
                call[key] = value
        return call, tensors


__all__ = ["LossCall"]

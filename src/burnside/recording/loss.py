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


    def terms(self, loss: torch.Tensor, names: dict[int, str]) -> list[dict] | None:
        """Each watched call of a loss that is no single one of them (`found` is None: a BCE summed plus a KL term
        written by hand, a loss scaled by a constant) as a term: the function, its scalar settings, what its input
        and target are (``names``: a tensor's id -> `logits`, `outputs.{name}`, `inputs.{name}`; else null), the
        elements its input holds, its value, and the loss's derivative by it (its weight in the loss: 1/8 for a
        term divided by the batch). None when there is no watched call, or a term is not a scalar of the loss's
        graph."""
        if not self.calls or not loss.requires_grad:
            return None
        outs = [out for _, _, out in self.calls]
        if any(out.numel() != 1 or not out.requires_grad for out in outs):
            return None
        try:
            weights = torch.autograd.grad(loss, outs, retain_graph=True, allow_unused=True)
        except RuntimeError:
            return None
        found = []
        for (name, arguments, out), weight in zip(self.calls, weights, strict=True):
            values = list(arguments.values())
            term: dict = {"fn": name}
            for key, value in list(arguments.items())[2:]:
                if key not in _DEPRECATED and isinstance(value, (bool, str)):
                    term[key] = value
                elif key not in _DEPRECATED and isinstance(value, (int, float)) and math.isfinite(value):
                    term[key] = value
            for key, value in (("input", values[0]), ("target", values[1])):
                term[key] = names.get(id(value)) if isinstance(value, torch.Tensor) else None
            term["elements"] = int(values[0].numel()) if isinstance(values[0], torch.Tensor) else None
            term["value"] = float(out.detach().double())
            term["weight"] = float(weight.double()) if weight is not None else 0.0
            found.append(term)
        return found


def merge_terms(recorded: list[dict] | None, step: list[dict] | None, k: int) -> list[dict] | None:
    """The loss terms of steps 0..k: ``recorded`` (steps before k, each term's `values` and `weights` per step)
    with step ``k``'s; None once a step's terms are missing or are other calls than step 0's."""
    if step is None or (k > 0 and recorded is None):
        return None
    if k == 0:
        return [{**{key: v for key, v in term.items() if key not in ("value", "weight")},
                 "values": [term["value"]], "weights": [term["weight"]]} for term in step]
    if [t["fn"] for t in recorded] != [t["fn"] for t in step]:
        return None
    for kept, term in zip(recorded, step, strict=True):
        kept["values"].append(term["value"])
        kept["weights"].append(term["weight"])
    return recorded


__all__ = ["LossCall", "merge_terms"]

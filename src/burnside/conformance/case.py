"""One conformance case: a PyTorch layer, loss or optimizer, the configuration it is built with, and what
burn is suspected to compute instead (hypotheses the suite tests against the numbers).

The PyTorch side of a case is a small training loop recorded with `burnside.torch.record`, as a user's
loop is: the harness module (`Harness`) holds the layer's input as the parameter ``x`` (so its gradient is
recorded as ``grads.x``) and the layer as ``layer``; the loss is ``sum(output * probe)`` for a fixed random
``probe`` in the batch, so every output element's gradient is a different number; one SGD step (lr 0.1).
A loss case feeds the loss from ``x``; an optimizer case trains a layer a few steps with the optimizer. The
burn side of the same id is in `rust/conformance`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

Batch = dict[str, torch.Tensor]

#: The learning rate of a module case's one SGD step (rust/conformance: `MODULE_LR`).
MODULE_LR = 0.1


@dataclass(frozen=True)
class Hypothesis:
    """What burn may compute instead of PyTorch: the case run again in float64 with ``change`` applied.

    ``kind`` is ``"framework"`` (burn's own arithmetic, e.g. an epsilon outside the square root) or
    ``"default"`` (a configuration default burn sets differently; ``fix`` says how to set PyTorch's). The
    suite confirms it when burn's float32 trace is as close to this run as PyTorch's is to its own float64
    run, tensor by tensor. A difference no float64 run can model (a dropout mask drawn from burn's own random
    numbers) is confirmed instead by the burnside rule that names it (``rule``, e.g. ``"D013"``) firing.
    """

    kind: str
    cause: str
    change: Callable[[nn.Module], nn.Module] | None = None  # the PyTorch layer -> the layer computing the hypothesis
    fix: str = ""
    rule: str = ""
    #: for an optimizer's default: the PyTorch optimizer built with burn's setting, instead of the case's
    optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer] | None = None
    #: for a default that makes burn's side random (a dropout left on): confirmed when two runs of burn's side from
    #: the same start differ where it is off, while PyTorch's run is recorded with dropout off
    random: bool = False
    #: for a setting burn's side cannot even be built or loaded with (a default burn sets otherwise that gives
    #: its layer parameters PyTorch's has not): confirmed when burn's side fails with an error containing this
    failure: str = ""
    #: for a loss: the loss as burn computes it (e.g. pad tokens counted in the mean), instead of the case's
    loss: Callable[[torch.Tensor, Batch], torch.Tensor] | None = None


@dataclass(frozen=True)
class Case:
    """A case of the suite (its id is ``family/config``, the same on both sides)."""

    id: str
    title: str  # what is built, e.g. "nn.LayerNorm(16), defaults"
    layer: Callable[[], nn.Module | None]  # the PyTorch layer (None: a function of the input, see ``call``)
    x: tuple[int, ...] | None  # the shape of the input fed from parameter x (None: no float input)
    call: Callable[[nn.Module | None, torch.Tensor | None, Batch], torch.Tensor] | None = None  # default layer(x)
    batch: Callable[[torch.Generator], Batch] | None = None  # inputs besides the probe (int ids, targets)
    loss: Callable[[torch.Tensor, Batch], torch.Tensor] | None = None  # default sum(output * probe)
    loss_name: str = "probe_sum"
    optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer] | None = None
    #: for a default that makes burn's side random (a dropout left on): confirmed when two runs of burn's side from
    #: the same start differ where it is off, while PyTorch's run is recorded with dropout off
    random: bool = False
    #: for a setting burn's side cannot even be built or loaded with (a default burn sets otherwise that gives
    #: its layer parameters PyTorch's has not): confirmed when burn's side fails with an error containing this
    failure: str = ""
    steps: int = 1
    x_scale: float = 1.0
    hypotheses: tuple[Hypothesis, ...] = ()
    #: set when the twin cannot be compared at all, and why (burn has no such option)
    not_comparable: str = ""
    #: in the bounded subset CI runs
    ci: bool = False
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def family(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def kind(self) -> str:
        """``module``, ``loss`` or ``optimizer``."""
        return "optimizer" if self.optimizer is not None else "loss" if self.loss is not None else "module"


class Harness(nn.Module):
    """A layer fed from the parameter ``x`` (burn: `harness::Fed`), or a loss of ``x`` (`harness::Input`)."""

    def __init__(self, case: Case, layer: nn.Module | None, x: torch.Tensor | None) -> None:
        super().__init__()
        if x is not None:
            self.x = nn.Parameter(x)
        if layer is not None:
            self.layer = layer
        self._call = case.call

    def forward(self, batch: Batch) -> torch.Tensor:
        layer = getattr(self, "layer", None)
        x = getattr(self, "x", None)
        if self._call is not None:
            return self._call(layer, x, batch)
        return x if layer is None else layer(x)


def perturbed(layer: nn.Module, generator: torch.Generator) -> nn.Module:
    """``layer`` with every parameter moved off its initial value (a norm's weight 1 and bias 0 would hide a
    mistake in either): ``p + 0.1 * N(0, 1)``, drawn from ``generator``."""
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return layer


def probe_sum(output: torch.Tensor, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The module cases' loss: every output element weighted by its own random number."""
    return (output * batch["probe"]).sum()

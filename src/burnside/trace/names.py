"""Trace tensor names: `step{k}.{stage}[.{rest}]`, and their pipeline order."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The stages of one training step (or, in a forward trace, of one batch's forward pass: `layer_inputs`
#: and `outputs` are its own; `loss_inputs`, what the loss function inside the loss was given, the PyTorch
#: recorder's only), in the order they happen.
STAGES: tuple[str, ...] = (
    "inputs",
    "params_before",
    "layer_inputs",
    "activations",
    "logits",
    "outputs",
    "loss_inputs",
    "loss",
    "grads",
    "params_after",
    "buffers",
    "optim",
    "loss_after",
)
STAGE_INDEX = {stage: i for i, stage in enumerate(STAGES)}

_NAME = re.compile(r"^step(?P<step>\d+)\.(?P<stage>[a-z_]+)(?:\.(?P<rest>.+))?$")


@dataclass(frozen=True, order=True)
class TensorName:
    """A parsed trace tensor name."""

    step: int
    stage: str
    rest: str  # the input, param, buffer, module or output name, or `slot.param` for optim; "" for logits/loss

    @property
    def slot(self) -> str | None:
        """The optimizer slot (`exp_avg`, `step`, ...) of an `optim` tensor."""
        if self.stage != "optim" or not self.rest:
            return None
        return self.rest.split(".", 1)[0]

    @property
    def param(self) -> str | None:
        """The parameter path this tensor belongs to, if any."""
        if self.stage in ("params_before", "grads", "params_after"):
            return self.rest
        if self.stage == "optim" and "." in self.rest:
            return self.rest.split(".", 1)[1]
        return None

    @property
    def module(self) -> str | None:
        """The module path of an `activations` or `layer_inputs` tensor (`ln2`, `attn.q`)."""
        return self.rest if self.stage in ("activations", "layer_inputs") else None

    @property
    def is_shared_start(self) -> bool:
        """True for tensors both sides must start from bit-identically (seed S3).

        `params_before` only counts at step 0: later steps' params are themselves outputs.
        """
        return self.stage == "inputs" or (self.stage == "params_before" and self.step == 0)


def parse_name(name: str) -> TensorName | None:
    """Parse `step3.grads.fc1.weight`; None for a name outside the v1 grammar."""
    m = _NAME.match(name)
    if m is None or m.group("stage") not in STAGE_INDEX:
        return None
    return TensorName(int(m.group("step")), m.group("stage"), m.group("rest") or "")


def tensor_name(step: int, stage: str, rest: str = "") -> str:
    """Build a v1 tensor name."""
    if stage not in STAGE_INDEX:
        raise ValueError(f"unknown stage {stage!r}")
    return f"step{step}.{stage}.{rest}" if rest else f"step{step}.{stage}"


def order_key(name: str, param_order: dict[str, int]) -> tuple:
    """Sort key: step, stage, optimizer slot, then rank in ``param_order`` (parameters in module
    order, buffers, activations in execution order), then name."""
    parsed = parse_name(name)
    if parsed is None:
        return (1 << 30, 0, "", 0, name)
    key = parsed.param if parsed.stage not in ("buffers", "activations", "layer_inputs") else parsed.rest
    rank = param_order.get(key, len(param_order)) if key is not None else 0
    return (parsed.step, STAGE_INDEX[parsed.stage], parsed.slot or "", rank, name)

"""Trace tensor names: `step{k}.{stage}[.{rest}]`, and their pipeline order."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The stages of one training step (or, in a forward trace, of one batch's forward pass: `layer_inputs`
#: and `outputs` are its own; `loss_inputs`, what the loss function inside the loss was given, the PyTorch
#: recorder's only; `micro_inputs`, `micro_logits` and `micro_loss`, each micro-batch's batch, output and
#: loss in a trace that accumulates gradients, metadata `accumulate`), in the order they happen.
STAGES: tuple[str, ...] = (
    "inputs",
    "params_before",
    "micro_inputs",
    "micro_logits",
    "micro_loss",
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

#: The stages of one micro-batch of an accumulating trace: `step{k}.micro_inputs.{j}.{name}`,
#: `step{k}.micro_logits.{j}`, `step{k}.micro_loss.{j}` (j from 0 to accumulate - 1).
MICRO_STAGES: tuple[str, ...] = ("micro_inputs", "micro_logits", "micro_loss")
_MICRO = re.compile(r"^(?P<j>0|[1-9]\d*)(?:\.(?P<rest>.+))?$")

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
    def micro(self) -> int | None:
        """The micro-batch number j of a `micro_*` tensor (`step2.micro_inputs.3.x` -> 3); None otherwise or
        for a malformed one."""
        if self.stage not in MICRO_STAGES:
            return None
        m = _MICRO.match(self.rest)
        return int(m.group("j")) if m is not None else None

    @property
    def micro_rest(self) -> str:
        """What follows the micro-batch number: the input's name of a `micro_inputs` tensor (`x`), "" for
        `micro_logits` and `micro_loss`."""
        m = _MICRO.match(self.rest) if self.stage in MICRO_STAGES else None
        return (m.group("rest") or "") if m is not None else ""

    @property
    def is_shared_start(self) -> bool:
        """True for tensors both sides must start from bit-identically (seed S3).

        `params_before` only counts at step 0: later steps' params are themselves outputs.
        """
        return self.stage in ("inputs", "micro_inputs") or (self.stage == "params_before" and self.step == 0)


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


def micro_name(step: int, stage: str, micro: int, rest: str = "") -> str:
    """A micro-batch's tensor name: `step{k}.micro_inputs.{j}.{name}`, `step{k}.micro_logits.{j}`."""
    if stage not in MICRO_STAGES:
        raise ValueError(f"not a micro-batch stage: {stage!r}")
    return tensor_name(step, stage, f"{micro}.{rest}" if rest else str(micro))


def order_key(name: str, param_order: dict[str, int]) -> tuple:
    """Sort key: step, stage, optimizer slot, then rank in ``param_order`` (parameters in module
    order, buffers, activations in execution order), then name. The micro-batches of an accumulating
    step come one after the other, each one's inputs, logits and loss in that order."""
    parsed = parse_name(name)
    if parsed is None:
        return (1 << 30, 0, "", 0, name)
    if parsed.stage in MICRO_STAGES:
        j = parsed.micro
        within = f"{j if j is not None else 1 << 30:010d}.{MICRO_STAGES.index(parsed.stage)}"
        rank = param_order.get(parsed.micro_rest, len(param_order)) if parsed.micro_rest else 0
        return (parsed.step, STAGE_INDEX["micro_inputs"], within, rank, name)
    key = parsed.param if parsed.stage not in ("buffers", "activations", "layer_inputs") else parsed.rest
    rank = param_order.get(key, len(param_order)) if key is not None else 0
    return (parsed.step, STAGE_INDEX[parsed.stage], parsed.slot or "", rank, name)

"""The PyTorch recording loop behind `burnside.torch.record` and `burnside.reference.record_reference`.

`record_trace` trains a model and writes every tensor of every step to a trace, as `LoopSettings` say (the
optimizer's description and state: `burnside.recording.optim_state`; the module hooks: `hooks`; the statistics:
`statistics`; the model's checks and dropout switches: `model`). A module of its own so that `burnside.torch`
(which records the reference first when asked) and `burnside.recording.reference` (which re-runs this loop in
float64) both import it and not each other. Users call `burnside.torch.record`; nothing here is public
(`__all__` lists what the two recorders import).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside import __version__
from burnside.errors import BurnsideError
from burnside.recording.hooks import ModuleHooks
from burnside.recording.loss import LossCall, merge_terms
from burnside.recording.model import (
    Batch,
    _dropout_off,
    active_dropouts,
    check_model,
    nonpersistent_buffers,
    output_tensors,
    tied_names,
)
from burnside.recording.optim_state import host_array, optimizer_config, optimizer_state, step_optimizer
from burnside.recording.statistics import (
    StatisticsWriter,
    check_full_steps,
    layer_statistics_for,
    statistics_reserve,
)
from burnside.trace import tensor_name
from burnside.trace.names import micro_name
from burnside.trace.stream import open_writer

if TYPE_CHECKING:
    from burnside.progress import StepProgress


def loop_steps(batches: Batch | Sequence[Batch], steps: int | None, accumulate: int = 1) -> int:
    """The steps a loop of ``batches`` runs, as `record_trace` counts them (an invalid count is refused there)."""
    n = 1 if isinstance(batches, Mapping) else len(batches)  # type: ignore[arg-type]
    if steps is not None:
        return steps
    if type(accumulate) is int and accumulate > 1:
        return n // accumulate if n > 1 else 1
    return n



def _training_outputs(output: object, forward: Callable, loss_fn: Callable, k: int,
                      refuse: Callable[[str, int], BurnsideError]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """What a training step's forward gave: (the tensor recorded as `logits`, the outputs recorded as
    `outputs.{name}`). One tensor is the logits and no output is named. A tuple, a list or a dict (a VAE's
    reconstruction, mu and logvar; a ModelOutput) goes whole to a ``loss_fn`` of the user's, each tensor recorded
    under its name as `record_forward` names it (`0`, `1`, ... or the keys), its first standing as the logits; with
    the default cross-entropy it is refused, naming the ``forward=`` that gives the logits."""
    if isinstance(output, torch.Tensor):
        return output, {}
    if loss_fn is nn.functional.cross_entropy or not isinstance(output, (Mapping, tuple, list)):
        raise refuse(_not_logits(output, forward), k)
    outputs = output_tensors(output, forward, k)
    return next(iter(outputs.values())), outputs


def _not_logits(output: object, forward: Callable) -> str:
    """Why ``output``, what ``forward`` gave, is not the logits tensor, and the ``forward=`` that gives them."""
    def shown(value: object) -> str:
        return f"Tensor {list(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__

    if isinstance(output, Mapping):
        keys = list(output)
        key = "logits" if "logits" in output else next(
            (k for k in keys if isinstance(output[k], torch.Tensor)), keys[0] if keys else "logits")
        what = (f"a {type(output).__name__} ({', '.join(f'{k!r}: {shown(v)}' for k, v in list(output.items())[:6])}"
                f"{', ...' if len(keys) > 6 else ''})")
        pick = f"[{key!r}]".replace("'", '"')
    elif isinstance(output, (tuple, list)):
        what = (f"a {type(output).__name__} of {len(output)} ({', '.join(shown(v) for v in output[:6])}"
                f"{', ...' if len(output) > 6 else ''})")
        index = next((i for i, v in enumerate(output) if isinstance(v, torch.Tensor)), 0)
        pick = f"[{index}]"
    else:
        what, pick = f"a {type(output).__name__}", ""
    if forward is default_forward:
        fix = (f'pass forward=lambda m, b: m(b["x"]){pick} (the logits)' if pick
               else "pass forward=lambda m, b: ... returning the logits tensor")
        return f"the model's forward returned {what}, not the logits tensor: {fix}"
    return (f"forward(model, batch) returned {what}, not the logits tensor: make it return the logits"
            + (f", e.g. its {pick}" if pick else ""))


def _not_scalar(loss: object, loss_fn: Callable) -> str | None:
    """Why ``loss`` is not a scalar loss tensor, None if it is one."""
    name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
    if not isinstance(loss, torch.Tensor):
        return f"loss_fn ({name}) returned a {type(loss).__name__}, not a scalar tensor: return the loss as a tensor"
    if loss.numel() != 1:
        return (f"the loss has shape {list(loss.shape)}, not a scalar (loss_fn {name} gives a loss per element, as "
                'reduction="none" does): reduce it to one number, with reduction="mean" or '
                "loss_fn=lambda logits, y: your_loss(logits, y).mean()")
    return None



def loss_name(loss_fn: Callable) -> str:
    """The trace's ``loss_fn``: the function's ``__name__`` (``cross_entropy``), a loss module's class name
    (``SmoothL1Loss``), a `functools.partial`'s function's name; ``<lambda>`` for a lambda (name it with
    ``metadata={"loss_fn": ...}``)."""
    inner = getattr(loss_fn, "func", loss_fn)  # functools.partial
    return getattr(inner, "__name__", type(inner).__name__)


def _loss(loss_fn: Callable, output: torch.Tensor, batch: Batch, target: str | None, k: int,
          refuse: Callable[[str, int], BurnsideError]) -> torch.Tensor:
    """``loss_fn(output, batch[target])``, or ``loss_fn(output, batch)`` with ``target=None``; a target the batch
    does not have is refused in one line."""
    if target is None:
        return loss_fn(output, batch)
    if target not in batch:
        raise refuse(f"the batch has no {target!r} (target={target!r}; its keys: {', '.join(map(repr, batch))}): "
                     f"pass target= the key of the loss's target, or target=None for a loss of the model's output "
                     f"and the whole batch, loss_fn(output, batch)", k)
    return loss_fn(output, batch[target])


def _step_and_record(writer, k: int, model: nn.Module, named: list[tuple[str, nn.Parameter]],
                     names_by_param: Mapping[int, str], optimizer: torch.optim.Optimizer, scheduler: object,
                     clip_grad_norm: float | None, lrs: list[float], step: Callable[[], object]) -> None:
    """After step ``k``'s backward pass: its gradients recorded (before clipping, as backward gave them), the
    declared clipping, the optimizer step (``step``), the schedule, then the parameters, buffers and optimizer
    state after it."""
    for name, p in named:
        if p.grad is not None:
            writer.add(tensor_name(k, "grads", name), host_array(p.grad))
    if clip_grad_norm is not None:
        nn.utils.clip_grad_norm_([p for _, p in named], clip_grad_norm)
    lrs.append(float(optimizer.param_groups[0]["lr"]))
    step()
    if scheduler is not None:
        scheduler.step()
    for name, p in named:
        writer.add(tensor_name(k, "params_after", name), host_array(p))
    for name, b in model.named_buffers():
        writer.add(tensor_name(k, "buffers", name), host_array(b))
    for slot_name, value in optimizer_state(optimizer, names_by_param):
        writer.add(tensor_name(k, "optim", slot_name), value)


def _closure(model: nn.Module, optimizer: torch.optim.Optimizer, forward: Callable, loss_fn: Callable, batch: Batch,
             target: str | None, k: int, refuse: Callable[[str, int], BurnsideError]) -> Callable[[], torch.Tensor]:
    """The closure an optimizer that re-evaluates the loss calls (``optimizer.step(closure)``, L-BFGS): zero
    the gradients, forward, loss, backward, return the loss. The recorded step's gradients are those of the
    forward pass before it; activations are not recorded again."""
    def closure() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            loss = _loss(loss_fn, forward(model, batch), batch, target, k, refuse)
        loss.backward()
        return loss
    return closure


def default_forward(model: nn.Module, batch: Batch) -> torch.Tensor:
    """``model(batch["x"])``: the logits when a loop gives no ``forward`` of its own."""
    if "x" not in batch:
        raise BurnsideError(f"the batch has no input 'x' (it has {', '.join(map(repr, batch)) or 'nothing'}), which "
                            "the default forward feeds the model: pass forward=lambda model, batch: ... "
                            "(e.g. model(batch['input_ids']))")
    return model(batch["x"])


@dataclass(frozen=True)
class LoopSettings:
    """How a recorded training loop runs, besides its model, optimizer, batches and file: the keyword arguments
    of `burnside.torch.record` and `burnside.reference.record_reference` that reach the loop (their docstrings say
    what each means), built once by those functions and handed whole to `record_trace`."""

    steps: int | None = None
    loss_fn: Callable = nn.functional.cross_entropy
    forward: Callable = default_forward
    target: str | None = "y"
    metadata: Mapping[str, object] | None = None
    activations: bool = True
    layer_inputs: bool = True
    clip_grad_norm: float | None = None
    dropout: bool = False
    lr_schedule: Callable[[torch.optim.Optimizer], object] | None = None
    accumulate: int = 1
    full_steps: Sequence[int] | None = None
    layer_statistics: bool | None = None


def _statistics_asked(model: nn.Module, settings: LoopSettings, steps: int) -> tuple[list[int] | None, bool]:
    """The loop's full steps and whether its layers are statistics, checked, and its clipping checked."""
    full = check_full_steps(settings.full_steps, steps)
    layer = layer_statistics_for(model, settings.layer_statistics)
    clip = settings.clip_grad_norm
    if clip is not None and not clip > 0:
        raise BurnsideError(f"clip_grad_norm must be a positive number, got {clip!r}")
    return full, layer


class _Run:
    """What both loops (`record_trace`, `_record_accumulating`) set up before their first step, after their own
    checks: the schedule made on the optimizer, the optimizer's description, the module hooks (with ``hooks``),
    dropout off, the buffers as they were; and what they gather step by step for the metadata.

    ``lr_reason`` ends the refusal of an ``lr_schedule`` that is no factory (the plain loop's names the float64
    reference, the accumulating loop's does not)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, settings: LoopSettings, *, hooks: bool,
                 lr_reason: str) -> None:
        lr_schedule = settings.lr_schedule
        if lr_schedule is not None and not callable(lr_schedule):
            raise BurnsideError(f"lr_schedule takes a factory of the scheduler, e.g. `lr_schedule=lambda opt: "
                                f"LambdaLR(opt, ...)`, not a {type(lr_schedule).__name__} made on the optimizer"
                                + lr_reason)
        check_model(model)
        self.model = model
        self.named = list(model.named_parameters())
        self.names_by_param = {id(p): name for name, p in self.named}
        self.grads_len: list[int] = []
        self.scheduler = lr_schedule(optimizer) if lr_schedule is not None else None
        if self.scheduler is not None and not callable(getattr(self.scheduler, "step", None)):
            raise BurnsideError(f"lr_schedule(optimizer) gave a {type(self.scheduler).__name__}, not a scheduler "
                                "(no step()): give a factory such as `lambda opt: LambdaLR(opt, ...)`")
        self.config = optimizer_config(optimizer, self.names_by_param)  # before training: a schedule moves the lr
        base_lrs = getattr(self.scheduler, "base_lrs", None)
        if base_lrs:
            self.config["lr"] = float(base_lrs[0])  # the optimizer's own lr, which the schedule scales
        self.lrs: list[float] = []
        self.hooks = ModuleHooks(model, activations=settings.activations, layer_inputs=settings.layer_inputs) \
            if hooks and (settings.activations or settings.layer_inputs) else None
        self.active = active_dropouts(model)
        self.restore = [] if settings.dropout else _dropout_off(model)
        # the buffers as they were, put back if step 0 is refused (its forward pass updated BatchNorm's statistics)
        self.untouched = {name: b.detach().clone() for name, b in model.named_buffers()}

    def refuse(self, message: str, k: int) -> BurnsideError:
        if k == 0:  # a later step's refusal leaves the model as the steps before it trained it
            with torch.no_grad():
                for name, b in self.model.named_buffers():
                    if name in self.untouched:
                        b.copy_(self.untouched[name])
        return BurnsideError(message)

    def record_start(self, writer, k: int) -> None:
        """Step ``k``'s `params_before`: step 0's recorded, a later step's the previous step's `params_after`."""
        for name, p in self.named:
            if k == 0:
                writer.add(tensor_name(k, "params_before", name), host_array(p))
            else:  # bit-identical to the previous step's params_after: nothing ran in between
                writer.alias(tensor_name(k, "params_before", name), tensor_name(k - 1, "params_after", name),
                             lambda p=p: host_array(p))

    def step(self, writer, k: int, optimizer: torch.optim.Optimizer, clip_grad_norm: float | None,
             step: Callable[[], object]) -> None:
        """After step ``k``'s backward pass: the gradients counted, then `_step_and_record`."""
        self.grads_len.append(sum(p.grad is not None for _, p in self.named))
        _step_and_record(writer, k, self.model, self.named, self.names_by_param, optimizer, self.scheduler,
                         clip_grad_norm, self.lrs, step)

    def end(self) -> None:
        """The hooks removed and dropout put back as it was, however the loop ended."""
        if self.hooks is not None:
            self.hooks.remove()
        for undo in self.restore:
            undo()


class _LossSeen:
    """What the plain loop learns of its loss and outputs over the steps, for the metadata."""

    def __init__(self) -> None:
        #: the loss call found inside the loss (`burnside.recording.loss`), the same one every step it is recorded
        self.loss_call: dict | None = None
        #: the names of the outputs a forward pass returning several records (`outputs.{name}`)
        self.output_names: list[str] = []
        #: the loss functions inside a loss that is no single one of them, each step's value and weight
        #: (`LossCall.terms`)
        self.loss_terms: list[dict] | None = None

    def record(self, writer, k: int, batch: Batch, target: str | None, logits: torch.Tensor,
               outputs: dict[str, torch.Tensor], loss: torch.Tensor, watch: LossCall) -> None:
        """Step ``k``'s outputs' names, and its loss call's inputs (`loss_inputs.*`) or the loss's terms."""
        self.output_names = self.output_names or list(outputs)
        call = watch.found(loss)
        if call is None:
            names = {id(logits): "logits", **{id(t): f"outputs.{key}" for key, t in outputs.items()
                                              if t is not logits},
                     **{id(t): f"inputs.{key}" for key, t in batch.items() if isinstance(t, torch.Tensor)}}
            self.loss_terms = merge_terms(self.loss_terms, watch.terms(loss, names), k)
        else:
            self.loss_terms = None
        if call is not None and self.loss_call is None:
            self.loss_call = call[0]
        if call is not None and call[0] == self.loss_call:
            for key, t in call[1].items():
                name = tensor_name(k, "loss_inputs", key)
                if t is logits:
                    writer.alias(name, tensor_name(k, "logits"), lambda t=t: host_array(t))
                elif target is not None and t is batch.get(target):
                    writer.alias(name, tensor_name(k, "inputs", target), lambda t=t: host_array(t))
                else:
                    writer.add(name, host_array(t))

    def describe(self, meta: dict) -> None:
        if self.loss_call is not None:
            meta.setdefault("loss_call", self.loss_call)
        if self.output_names:
            meta.setdefault("outputs", self.output_names)
        if self.loss_terms:
            meta.setdefault("loss_terms", self.loss_terms)


def _told(progress: StepProgress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


def record_trace(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Batch | Sequence[Batch],
                 path: str | Path, settings: LoopSettings, progress: StepProgress | None = None) -> Path:
    """Train ``settings.steps`` steps and write every tensor of every step to a trace at ``path``.

    `burnside.torch.record` without its ``reference``: the arguments are documented there. A `.safetensors`
    trace is streamed (`burnside.trace.stream.TraceWriter`): each tensor is written as it is recorded, and
    ``step{k}.params_before.{p}`` (k >= 1) is an alias of ``step{k-1}.params_after.{p}`` (nothing touches the
    parameters between the two), so memory stays the loop's own. The file appears at ``path`` only once
    complete; an error or an interrupt leaves no file there (and a previous one as it was).
    """
    per_step = [batches] if isinstance(batches, Mapping) else list(batches)
    accumulate = settings.accumulate
    if type(accumulate) is not int or accumulate < 1:
        raise BurnsideError(f"accumulate must be a positive integer (the micro-batches of one optimizer step), "
                            f"got {accumulate!r}")
    if accumulate > 1:
        return _record_accumulating(model, optimizer, per_step, path, settings, progress)
    steps = settings.steps if settings.steps is not None else len(per_step)
    if steps < 1:
        raise BurnsideError("record needs at least one step")
    full, layer = _statistics_asked(model, settings, steps)
    if len(per_step) not in (1, steps):
        raise BurnsideError(f"got {len(per_step)} batches for {steps} steps; give one batch or one per step")
    run = _Run(model, optimizer, settings, hooks=True,
               lr_reason=": the float64 reference makes its own scheduler on its own optimizer")
    modules = sum(1 for name, _ in model.named_modules() if name) if run.hooks is not None else 0
    per_step_tensors = (len(per_step[0]) + 6 * len(run.named) + len(run.untouched) + 2 * modules + 6)
    names_text = (sum(len(name) + 4 for name, _ in run.named)
                  + sum(len(name) + 24 for name, _ in model.named_modules()))
    writer = StatisticsWriter(
        open_writer(path, expected_tensors=steps * per_step_tensors + 1,
                    metadata_estimate=4 * names_text + 32 * steps + len(str(dict(settings.metadata or {})))
                    + statistics_reserve(per_step_tensors, steps, full, layer, 2 * modules)),
        full, layer)
    seen = _LossSeen()
    forward, loss_fn, target = settings.forward, settings.loss_fn, settings.target
    with writer:
        _told(progress, 0, steps)
        try:
            for k in range(steps):
                batch = per_step[k % len(per_step)]
                loss = _record_forward_and_loss(writer, run, settings, seen, k, batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                run.step(writer, k, optimizer, settings.clip_grad_norm,
                         lambda: step_optimizer(optimizer, _closure(model, optimizer, forward, loss_fn, batch,
                                                                    target, k, run.refuse)))
                _told(progress, k + 1, steps)
            with torch.no_grad():
                last = per_step[(steps - 1) % len(per_step)]
                loss_after = _loss(loss_fn, forward(model, last), last, target, steps, run.refuse)
                writer.add(tensor_name(steps - 1, "loss_after"), host_array(loss_after).reshape(()))
        finally:
            run.end()
        meta = _metadata(run, steps, settings, run.hooks, settings.metadata, writer)
        seen.describe(meta)
        return writer.finish(meta)


def _record_forward_and_loss(writer, run: _Run, settings: LoopSettings, seen: _LossSeen, k: int,
                             batch: Batch) -> torch.Tensor:
    """Step ``k`` of the plain loop up to its loss, recorded: the inputs, the parameters before, the forward pass
    (the hooked layers' inputs and outputs), the logits and outputs, the loss call's inputs and the loss."""
    model, forward, loss_fn, target = run.model, settings.forward, settings.loss_fn, settings.target
    for name, t in batch.items():
        writer.add(tensor_name(k, "inputs", name), host_array(t))
    run.record_start(writer, k)
    if run.hooks is None:
        output = forward(model, batch)
    else:
        def sink(stage: str, key: str, tensor: torch.Tensor, k: int = k) -> None:
            writer.add(tensor_name(k, stage, key), host_array(tensor))

        with run.hooks.recording(sink):
            output = forward(model, batch)
    logits, outputs = _training_outputs(output, forward, loss_fn, k, run.refuse)
    with LossCall() as watch:
        loss = _loss(loss_fn, output, batch, target, k, run.refuse)
    wrong = _not_scalar(loss, loss_fn)
    if wrong is not None:
        raise run.refuse(wrong, k)
    writer.add(tensor_name(k, "logits"), host_array(logits))
    for key, t in outputs.items():
        if t is logits:
            writer.alias(tensor_name(k, "outputs", key), tensor_name(k, "logits"), lambda t=t: host_array(t))
        else:
            writer.add(tensor_name(k, "outputs", key), host_array(t))
    seen.record(writer, k, batch, target, logits, outputs, loss, watch)
    writer.add(tensor_name(k, "loss"), host_array(loss).reshape(()))
    return loss


def _record_accumulating(model: nn.Module, optimizer: torch.optim.Optimizer, per_step: list[Batch], path: str | Path,
                         settings: LoopSettings, progress: StepProgress | None) -> Path:
    """`record_trace` of a loop that accumulates gradients over ``settings.accumulate`` micro-batches per
    optimizer step: `zero_grad`, then `loss_fn(...).backward()` on each micro-batch's loss as ``loss_fn`` returns it
    (a loop that divides each loss by M does so in its ``loss_fn``), then one (clipped) optimizer step on the
    summed `.grad`.

    Each micro-batch j of step k is recorded as `step{k}.micro_inputs.{j}.{name}`, `step{k}.micro_logits.{j}` and
    `step{k}.micro_loss.{j}`; `step{k}.loss` is the micro-batches' losses summed in order in the loss's dtype (the
    loss whose gradient `step{k}.grads.*` is: what the optimizer steps on), `loss_after` the same sum of the
    trained model on the last step's micro-batches. Activations, layer inputs and the loss call are not recorded
    (one forward pass per step has them; here there are M); metadata `accumulate` is M."""
    m = settings.accumulate
    if isinstance(optimizer, torch.optim.LBFGS):
        raise BurnsideError("accumulate with torch.optim.LBFGS: its step re-evaluates the loss on one batch through "
                            "a closure, which is no accumulation; record L-BFGS without accumulate")
    steps = settings.steps if settings.steps is not None else (len(per_step) // m if len(per_step) > 1 else 1)
    if steps < 1:
        raise BurnsideError("record needs at least one step")
    if len(per_step) not in (1, steps * m):
        raise BurnsideError(f"got {len(per_step)} batches for {steps} steps of {m} micro-batches: give one batch "
                            f"(every micro-batch's) or one per micro-batch ({steps * m}: step k's micro-batch j is "
                            f"batches[k * {m} + j])")
    full, layer = _statistics_asked(model, settings, steps)
    run = _Run(model, optimizer, settings, hooks=False, lr_reason="")
    forward, loss_fn, target = settings.forward, settings.loss_fn, settings.target

    def batch_of(k: int, j: int) -> Batch:
        return per_step[(k * m + j) % len(per_step)]

    def micro_loss(k: int, j: int, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        logits = forward(model, batch)
        if not isinstance(logits, torch.Tensor):
            raise run.refuse(_not_logits(logits, forward), k)
        loss = _loss(loss_fn, logits, batch, target, k, run.refuse)
        wrong = _not_scalar(loss, loss_fn)
        if wrong is not None:
            raise run.refuse(wrong, k)
        return logits, loss

    per_micro = len(per_step[0]) + 2
    per_step_tensors = m * per_micro + 5 * len(run.named) + len(run.untouched) + 2
    writer = StatisticsWriter(
        open_writer(path, expected_tensors=steps * per_step_tensors + 1,
                    metadata_estimate=4 * sum(len(n) + 4 for n, _ in run.named) + 32 * steps
                    + len(str(dict(settings.metadata or {})))
                    + statistics_reserve(per_step_tensors, steps, full, False, 0)),
        full, layer)
    with writer:
        _told(progress, 0, steps)
        try:
            for k in range(steps):
                run.record_start(writer, k)
                optimizer.zero_grad(set_to_none=True)
                total = None
                for j in range(m):
                    batch = batch_of(k, j)
                    for name, t in batch.items():
                        writer.add(micro_name(k, "micro_inputs", j, name), host_array(t))
                    logits, loss = micro_loss(k, j, batch)
                    writer.add(micro_name(k, "micro_logits", j), host_array(logits))
                    writer.add(micro_name(k, "micro_loss", j), host_array(loss).reshape(()))
                    loss.backward()  # into .grad, summed with the micro-batches before
                    total = loss.detach().reshape(()) if total is None else total + loss.detach().reshape(())
                writer.add(tensor_name(k, "loss"), host_array(total))
                run.step(writer, k, optimizer, settings.clip_grad_norm, optimizer.step)
                _told(progress, k + 1, steps)
            with torch.no_grad():
                total = None
                for j in range(m):
                    _, loss = micro_loss(steps, j, batch_of(steps - 1, j))
                    total = loss.reshape(()) if total is None else total + loss.reshape(())
                writer.add(tensor_name(steps - 1, "loss_after"), host_array(total))
        finally:
            run.end()
        meta = _metadata(run, steps, settings, None, None, writer)
        meta["accumulate"] = m
        meta.update(settings.metadata or {})
        return writer.finish(meta)


def _metadata(run: _Run, steps: int, settings: LoopSettings, hooks: ModuleHooks | None,
              metadata: Mapping[str, object] | None, writer: StatisticsWriter | None = None) -> dict:
    """A training trace's metadata (docs/trace-format.md), the caller's ``metadata`` last."""
    model, named, clip_grad_norm = run.model, run.named, settings.clip_grad_norm
    # the model's dtype and device: its first float parameter's (an integer parameter's dtype is not the model's)
    first = next((p for _, p in named if p.is_floating_point()), named[0][1])
    meta = {
        "framework": "pytorch",
        "framework_version": torch.__version__,
        "device": str(first.device),
        "dtype": str(first.dtype).removeprefix("torch."),
        "steps": steps,
        "optimizer": {**run.config,
                      **({"clip_grad_norm": float(clip_grad_norm)} if clip_grad_norm is not None else {}),
                      **({"lr_per_step": run.lrs} if run.scheduler is not None else {})},
        "params": [name for name, _ in named],
        "grads_len": run.grads_len,
        "loss_fn": loss_name(settings.loss_fn),
        **({"target": settings.target} if settings.target is not None else {"loss_input": "batch"}),
        "recorder": f"burnside {__version__}",
    }
    if run.active:
        meta["dropout"] = f"on: {', '.join(run.active)}" if settings.dropout else "off"
    tied = tied_names(model)
    if tied:
        meta["tied"] = tied
    buffers = [name for name, _ in model.named_buffers()]
    if buffers:
        meta["buffers"] = buffers
    constants = nonpersistent_buffers(model)
    if constants:
        meta["buffers_nonpersistent"] = constants
    if hooks is not None:
        hooks.describe(meta)
    if writer is not None:
        writer.describe(meta)
    meta.update(metadata or {})
    return meta


__all__ = ["LoopSettings", "default_forward", "loop_steps", "loss_name", "record_trace"]

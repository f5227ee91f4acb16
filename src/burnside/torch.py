"""Record a PyTorch training loop into a burnside trace (the reference side).

Works for any `nn.Module`, loss function and optimizer (SGD, SGD with momentum,
Adam, AdamW are described fully in the metadata; others are recorded with their
class name and param-group settings).

    from burnside.torch import export_init, record
    export_init(model, {"x": x, "y": y}, "init.safetensors")
    record(model, opt, {"x": x, "y": y}, "torch.safetensors", steps=3, reference="reference.safetensors")

Besides parameters, gradients and optimizer state, a trace holds every buffer after each
step (`named_buffers()`: BatchNorm's running statistics) and every submodule's forward output
in execution order (`activations`, recorded by forward hooks; `activations=False` turns them
off for a big model). With ``reference=PATH``, `record` first records the float64 reference of the same
loop from the untrained model (`burnside.reference.record_reference`), then trains it.

`record_forward` records a model's forward passes over a few batches instead (an inference port:
no optimizer, no gradients), as a forward trace (docs/trace-format.md, "Forward traces"):

    from burnside.torch import record_forward
    record_forward(model, [{"x": x0}, {"x": x1}], "torch.safetensors", reference="reference.safetensors")

The loops themselves live in the record stage's package, `burnside.recording` (`loop.py`, `forward.py`,
`generate.py`, shared with its float64 reference, `reference.py`); `record`, `record_forward`, `record_generate`
and `export_init` are this module's API, and the package root's (`burnside.record`, `burnside.record_forward`).
This module stays at the package root, outside `burnside.recording`, because `burnside.torch` is the import path
the README, the templates' record.py and the pytest plugin give users.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from burnside import __version__
from burnside.recording.forward import Forward, batch_list, forward_statistics, record_forward_trace
from burnside.recording.loop import (
    LAYER_STATISTICS_ABOVE,
    Batch,
    LoopSettings,
    check_full_steps,
    check_model,
    default_forward,
    layer_statistics_for,
    loop_steps,
    record_trace,
    tied_names,
)
from burnside.recording.optim_state import to_numpy
from burnside.errors import BurnsideError
from burnside.recording.reference import record_forward_reference, record_loop_reference, reference_files
from burnside.trace import write_trace
from burnside.trace.init_batches import batch_tensors

if TYPE_CHECKING:
    from burnside.progress import StepProgress


def export_init(model: nn.Module, inputs: Batch | Sequence[Batch], path: str | Path, *,
                full_steps: Sequence[int] | None = None, layer_statistics: bool | None = None,
                steps: int | None = None) -> Path:
    """Write the initial parameters, buffers and the batches (PyTorch names and layout) for the other side.

    ``inputs`` is one batch, or one batch per step as given to `record`: step 0's batch is
    `inputs.{name}`, and when a later step's batch differs every step k >= 1 gets
    `step{k}.inputs.{name}` (burn reads it with `InitFile::float_input_at(k, ..)`).
    Float tensors are written as f32, a bfloat16 or float16 one in its own dtype (BF16, F16: a half model's
    weights as they are), integer tensors (labels, `num_batches_tracked`, an integer parameter) as i64. A
    parameter reachable under several names is written once, under the name `named_parameters()` gives it;
    the metadata's ``tied`` maps each other name to it. A model `record` would refuse (no parameters, on the
    meta device) is refused here too, before anything is written.

    ``full_steps`` and ``layer_statistics``, as given to `record`, go into the metadata (normalised: ascending
    step indices, ``layer_statistics`` by the model's size when None), so the burn recorder records the same
    steps and layers as statistics only. Negative steps count from the end of ``steps`` (default: the number of
    batches, when one per step is given).
    """
    check_model(model, trainable=False)
    batches = [inputs] if isinstance(inputs, Mapping) else list(inputs)
    statistics_meta: dict = {}
    layer = layer_statistics_for(model, layer_statistics)  # as `record` decides it
    if full_steps is not None:
        check_full_steps(full_steps, 1 << 62)  # a list of integers, before they are counted
        count = steps if steps is not None else (len(batches) if len(batches) > 1 else None)
        if count is None:
            if any(k < 0 for k in full_steps):
                raise BurnsideError(f"full_steps={list(full_steps)} counts from the end: give steps=N, the "
                                    "loop's steps")
            count = max((int(k) for k in full_steps), default=0) + 1
        statistics_meta["full_steps"] = check_full_steps(full_steps, count)
    if full_steps is not None or layer:
        statistics_meta["layer_statistics"] = layer
    tensors: dict[str, np.ndarray] = {}
    params = [name for name, _ in model.named_parameters()]
    for name, p in model.named_parameters():
        tensors[f"params.{name}"] = to_numpy(_init_dtype(p))
    buffers = [name for name, _ in model.named_buffers()]
    for name, b in model.named_buffers():
        tensors[f"buffers.{name}"] = to_numpy(_init_dtype(b))
    tensors |= batch_tensors([{name: to_numpy(_init_dtype(t))
                               for name, t in batch.items()} for batch in batches])
    metadata = {"params": params, "buffers": buffers, "inputs": list(batches[0]) if batches else [],
                "framework": "pytorch", "framework_version": torch.__version__,
                "recorder": f"burnside {__version__}"}
    tied = tied_names(model)
    if tied:
        metadata["tied"] = tied
    metadata |= statistics_meta
    return write_trace(Path(path), tensors, metadata, kind="init")


def _init_dtype(t: torch.Tensor) -> torch.Tensor:
    """``t`` in the dtype an init file holds it in: a half float as is, another float as float32, an integer as
    int64."""
    if t.dtype in (torch.bfloat16, torch.float16):
        return t
    return t.float() if t.is_floating_point() else t.long()


def record(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Batch | Sequence[Batch],
    path: str | Path,
    *,
    steps: int | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | Callable[[torch.Tensor, Batch], torch.Tensor]
    = nn.functional.cross_entropy,
    forward: Callable[[nn.Module, Batch], torch.Tensor] = default_forward,
    target: str | None = "y",
    metadata: Mapping[str, object] | None = None,
    activations: bool = True,
    layer_inputs: bool = True,
    clip_grad_norm: float | None = None,
    dropout: bool = False,
    lr_schedule: Callable[[torch.optim.Optimizer], object] | None = None,
    progress: StepProgress | None = None,
    reference: str | Path | None = None,
    reference_variants: bool = True,
    accumulate: int = 1,
    full_steps: Sequence[int] | None = None,
    layer_statistics: bool | None = None,
) -> Path:
    """Train ``steps`` steps and write every tensor of every step to a trace at ``path``.

    ``batches`` is one batch (reused every step, as in the seed) or one batch per step.
    ``forward(model, batch)`` gives the logits (default ``model(batch["x"])``);
    ``loss_fn(logits, batch[target])`` the scalar loss. With ``target=None`` the loss is one of the model's
    output and the whole batch, ``loss_fn(output, batch)``: a loss that needs more than one target (a TD target
    from a frozen target network, ``with torch.no_grad(): target_net(batch["next_obs"])``, a mask, a contrastive
    pair), the float64 reference calling it the same way on its float64 batches. The metadata's ``loss_fn``
    names the loss (the function's ``__name__``, a loss module's class: ``SmoothL1Loss``); name a lambda with
    ``metadata={"loss_fn": "td_loss"}``. It says ``target`` (the batch key), or ``loss_input: batch`` with
    ``target=None``. A module the loss calls (a target network) is not the recorded model: its parameters are
    not recorded and not stepped. Buffers are recorded after each
    step as ``step{k}.buffers.{name}``; with ``activations`` (the default) every submodule's
    forward output is recorded as ``step{k}.activations.{module path}``, and the metadata
    lists them in execution order (``activations``) with their classes (``modules``). With ``layer_inputs`` (the
    default) every submodule's first tensor input is recorded too, as ``step{k}.layer_inputs.{module path}``
    (what the module was fed: a norm fed a sum of embeddings or a residual has no recorded layer before it, and
    the diagnosis measures its epsilon from this), exactly as `record_forward` records it; the metadata lists
    them (``layer_inputs``). A port need not record them.
    ``clip_grad_norm`` clips as ``torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)``
    between ``backward`` and ``optimizer.step()``; the trace's gradients are what ``backward`` gave
    (before clipping), and its optimizer metadata says ``clip_grad_norm``.
    Dropout is off while recording, unless ``dropout=True`` (`nn.Dropout*` modules in eval mode, the
    attention dropout of `nn.MultiheadAttention` at 0, restored afterwards; metadata ``dropout: off``,
    or ``on: ...`` listing the dropouts left on): a dropout mask is drawn from each framework's own
    random numbers and can never match, so a parity check compares the loop with dropout off on both
    sides (the burn side builds its dropouts with probability 0).
    ``lr_schedule(optimizer)`` makes the loop's learning-rate scheduler (e.g.
    ``lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, warmup)``), stepped after each optimizer step;
    the optimizer metadata then lists the learning rate each step used (``lr_per_step``). Pass the
    factory, not a scheduler made on ``optimizer``: the float64 reference makes its own.
    ``progress`` is told the steps done (`burnside.progress.Progress.steps` draws it).
    A parameter reachable under several names (``lm_head.weight = wte.weight``) is recorded once, under the
    name `named_parameters()` gives it, and the metadata's ``tied`` maps each other name to it. Refused in one
    line before anything runs: a model without parameters (or none that requires grad), one on the meta device
    or a device the recorder cannot read; at step 0, before the optimizer steps (a BatchNorm's
    statistics put back): a forward that gives a dict or a tuple rather than the logits, a batch without the
    ``target`` key, a loss that is not a scalar.

    ``accumulate=M`` (M >= 2) records a loop that accumulates gradients: each step is `zero_grad`, then M
    micro-batches, each one's forward, loss and ``loss.backward()`` (on the loss as ``loss_fn`` returns it, so the
    `.grad` PyTorch steps on is the sum of the M gradients; a loop that divides each loss by M puts that in its
    ``loss_fn``: ``loss_fn=lambda logits, y: F.cross_entropy(logits, y) / M``), then one optimizer step (clipped
    first with ``clip_grad_norm``). ``batches`` is one batch (every micro-batch's) or ``steps * M`` of them, step k's
    micro-batch j being ``batches[k * M + j]`` (``steps`` defaults to ``len(batches) // M``). Each micro-batch is
    recorded as ``step{k}.micro_inputs.{j}.{name}``, ``step{k}.micro_logits.{j}``, ``step{k}.micro_loss.{j}``;
    ``step{k}.grads.*`` are the accumulated gradients, ``step{k}.loss`` the micro-batches' losses summed; the
    metadata says ``accumulate: M``; activations, layer inputs and the loss call are not recorded (docs/trace-format.md,
    "Gradient accumulation"). L-BFGS is refused with it.

    ``full_steps`` (a list of step indices, negative ones counting from the end: ``[0, -1]`` the first and the
    last) records only those steps in full: at every other step each tensor that may be is recorded as its
    statistics only (mean, norm, largest magnitude, non-finite count, a hash of its bytes: docs/trace-format.md,
    "Version 3: statistics"), which compare judges as far as statistics allow. Never statistics: the inputs,
    ``step0.params_before.*`` (the start), 0-d scalars (the loss), integer tensors. ``None`` (the default) records
    every step in full, as before. ``layer_statistics=True`` records every step's layer inputs and activations as
    statistics (full steps too); ``None`` (the default) does so for a model of at least
    ``LAYER_STATISTICS_ABOVE`` (50,000,000) parameters. The metadata says ``full_steps`` and ``layer_statistics``,
    and the init file made from the trace carries them, so the burn recorder records the same way. A step the
    loop does not have is refused in one line before anything runs.

    With ``reference`` (a path), the float64 reference of the same loop is recorded first, from the
    untrained model, exactly as `burnside.reference.record_reference(model, optimizer, batches, reference,
    ...)` with these arguments would (``reference_variants`` is its ``variants``; ``activations`` is the
    trace's alone; the reference records ``layer_inputs`` too), and then the trace. ``progress`` is told the
    reference's runs as parts
    (``float64 reference``, ``float64 reference, burn-adam variant``). If the reference is refused (a step
    hook, an Adam with its own ``step``, dropout on with ``dropout=True``), nothing is trained and nothing
    written; if the trace then fails, the model may be partly trained, as without ``reference``, and the
    reference files this call wrote are deleted, so no reference is left without its trace.
    """
    settings = LoopSettings(steps=steps, loss_fn=loss_fn, forward=forward, target=target, metadata=metadata,
                            activations=activations, layer_inputs=layer_inputs, clip_grad_norm=clip_grad_norm,
                            dropout=dropout, lr_schedule=lr_schedule, accumulate=accumulate, full_steps=full_steps,
                            layer_statistics=layer_statistics)
    if reference is None:
        return record_trace(model, optimizer, batches, path, settings, progress)
    files = reference_files(model, optimizer, reference, variants=reference_variants)
    clash = next((f for f in files if _same_file(f, path)), None)
    if clash is not None:
        what = "reference=" if clash is files[-1] else f"the variant file of reference={reference}"
        stem = Path(path).name.removesuffix(".safetensors")
        raise BurnsideError(f"path and {what} are the same file ({path}): give the trace and the float64 reference "
                            f"a file each, e.g. reference={stem}.reference.safetensors")
    if not isinstance(batches, Mapping):
        batches = list(batches)  # one pass of an iterator for the reference's runs and the trace's
    check_full_steps(full_steps, loop_steps(batches, steps, accumulate))  # before the reference runs
    layer_statistics_for(model, layer_statistics)
    before = {f: _stamp(f) for f in files}
    try:
        record_loop_reference(model, optimizer, batches, reference, settings, variants=reference_variants,
                              progress=_reference_progress(progress))
        return record_trace(model, optimizer, batches, path, settings, progress)
    except BaseException:
        for f in files:
            if _stamp(f) != before[f]:  # written by this call
                with contextlib.suppress(FileNotFoundError):
                    f.unlink()
        raise


def record_forward(
    model: nn.Module,
    batches: Batch | Sequence[Batch],
    path: str | Path,
    *,
    forward: Forward | None = None,
    eval: bool = True,  # noqa: A002 (model.eval(): what it means)
    activations: bool = True,
    layer_inputs: bool = True,
    metadata: Mapping[str, object] | None = None,
    progress: StepProgress | None = None,
    reference: str | Path | None = None,
    statistics: bool | None = None,
    full_steps: Sequence[int] | None = None,
) -> Path:
    """Run ``model`` forward on each batch, under ``torch.no_grad()``, and write a forward trace at ``path``.

    ``batches`` is one batch (a dict of names to tensors) or a sequence of them, one forward pass each
    (``step{k}`` is batch k). ``forward(model, batch)`` gives the outputs (default ``model(t)`` for a batch of
    one tensor, ``model(**batch)`` for several): a tensor (recorded as ``outputs.output``), a tuple or list
    (``outputs.0``, ``outputs.1``, ...), a dict or a ModelOutput (its keys), nested ones joined by ``.``
    (``outputs.past.0.1``), None values skipped. Anything else in them (a string, a number, an object) is
    refused in one line naming it and where it was, before anything is written.

    The trace holds the parameters (``step0.params_before.*``, in the model's dtype) and buffers
    (``step0.buffers.*``, integer ones as int64) once, as the model holds them before batch 0; each batch's
    inputs; with ``activations`` every submodule's output (its first tensor), with ``layer_inputs`` every
    submodule's first tensor input (what it was fed, for a port that isolates one layer; a module fed no tensor
    has none), each in execution order and named by module path, ``{module}#2`` for a second call in one pass.
    The metadata says ``kind: forward``, ``mode`` (``eval`` or ``train``), the ``outputs`` names, the recorded
    modules' classes (``modules``) and shared parameters (``tied``).

    ``eval`` (the default) runs the model in eval mode, ``model.eval()``; ``eval=False`` runs it as it is (a
    BatchNorm in training mode normalises by the batch's statistics). Either way each submodule's ``training``
    flag is put back afterwards, and so are the buffers a training-mode pass updated: the model is left as
    given. Dropout that is on (``eval=False``) is turned off while recording, as `record` does: its masks are
    random numbers no port draws alike (metadata ``dropout: off``).
    ``progress`` is told the batches done (`burnside.progress.Progress.steps` draws it).

    ``statistics=True`` records a large model's trace small (docs/trace-format.md, "Version 3: statistics"): the
    parameters as their statistics only (mean, norm, largest magnitude, non-finite count and an xxh3 hash of their
    bytes: the port's load is checked by hash, bit-identical or not, with a lower bound on how far apart), and the
    layer inputs and activations as statistics at every batch but those in ``full_steps`` (default ``[0, -1]``,
    the first and the last; negative indices count from the end; ``[]``: none), where they stay in full so a
    slip is placed at its layer. Inputs, outputs and buffers are always in full. ``None`` (the default) is on for a
    model of at least ``LAYER_STATISTICS_ABOVE`` (50,000,000) parameters, or when ``full_steps`` is given;
    ``False`` records everything in full. The metadata says ``params_statistics``, ``full_steps`` and
    ``layer_statistics`` (false), and the init file `burnside check` makes carries them to the burn recorder,
    which records the same names as statistics. A port that loads its weights from the init file
    (`InitFile::load_module`) needs them in full: record it with ``statistics=False``.

    With ``reference`` (a path), the float64 reference of the same forward passes is recorded first, exactly as
    `burnside.reference.record_forward_reference` with these arguments would: a float64 deep copy of the model
    on the batches with their float tensors as float64 (integer ones as given), a forward trace of dtype
    float64 marked as a reference (``burnside compare A B --reference`` takes it as the referee), with
    ``progress`` told its batches as the part ``float64 reference``. A refusal in the reference's run writes
    nothing; if the trace then fails, the reference this call wrote is deleted.
    """
    run = {"forward": forward, "eval": eval, "activations": activations, "layer_inputs": layer_inputs,
           "metadata": metadata, "statistics": statistics, "full_steps": full_steps}
    if reference is None:
        return record_forward_trace(model, batches, path, progress=progress, **run)
    if _same_file(reference, path):
        stem = Path(path).name.removesuffix(".safetensors")
        raise BurnsideError(f"path and reference= are the same file ({path}): give the trace and the float64 "
                            f"reference a file each, e.g. reference={stem}.reference.safetensors")
    per_batch = batch_list(batches)  # one pass of an iterator for the reference's run and the trace's
    forward_statistics(model, statistics, full_steps, len(per_batch))  # refused before the reference runs
    before = _stamp(Path(reference))
    try:
        record_forward_reference(model, per_batch, reference, progress=_reference_progress(progress), **run)
        return record_forward_trace(model, per_batch, path, progress=progress, **run)
    except BaseException:
        if _stamp(Path(reference)) != before:  # written by this call
            with contextlib.suppress(FileNotFoundError):
                Path(reference).unlink()
        raise


def record_generate(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    path: str | Path,
    *,
    steps: int = 8,
    step: Callable | None = None,
    activations: bool = True,
    layer_inputs: bool = True,
    metadata: Mapping[str, object] | None = None,
    progress: StepProgress | None = None,
    reference: str | Path | None = None,
    statistics: bool | None = None,
    full_steps: Sequence[int] | None = None,
) -> Path:
    """Record a language model's greedy generation as a forward trace, one batch per step of the decode loop.

    ``prompt_ids`` ([1, prompt length] token ids) is the prefill, batch 0; each of the ``steps`` decode steps
    after it feeds the token the previous step chose (the argmax of its last logits row) at the next position,
    batch k. Each batch holds `input_ids` and `position_ids` (inputs a port reads, teacher-forced: it runs
    PyTorch's tokens, whatever its own logits would choose) and, as `record_forward` records, every module's
    output and the logits (`outputs.output`, [1, tokens, vocabulary]). The metadata `generation` holds the
    prompt's length, the steps and the tokens chosen (`steps + 1`: the last one chosen from the last step).

    ``step(model, input_ids, position_ids, cache) -> (logits, cache)`` is one step of the loop with the cache the
    previous step returned (None at the prefill); the default runs a Hugging Face `*ForCausalLM` with its own
    `DynamicCache`. With ``reference``, the float64 reference of the same steps is recorded first (the cache of
    its run its own), as `record_forward` does. ``statistics`` and ``full_steps`` are `record_forward`'s: for a
    large model (on by default from ``LAYER_STATISTICS_ABOVE`` parameters) the parameters are recorded as
    statistics (the load checked by hash), and the layers of every step in full unless ``full_steps`` names
    fewer (a decode step's layers are one token's), the logits always in full.
    """
    from burnside.recording.generate import record_generate_trace

    return record_generate_trace(model, prompt_ids, path, steps=steps, step=step, reference=reference,
                                 activations=activations, layer_inputs=layer_inputs,
                                 metadata=dict(metadata or {}), progress=progress, record_forward=record_forward,
                                 statistics=statistics, full_steps=full_steps)


def _same_file(a: str | Path, b: str | Path) -> bool:
    """Whether paths ``a`` and ``b`` name one file (through `..`, links and relative spellings)."""
    return Path(a).resolve() == Path(b).resolve()


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """The file at ``path`` as it is now (inode, size, modification ns), None if absent: a file written
    since (atomically, so a new inode) gets another stamp."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def _reference_progress(progress: StepProgress | None) -> StepProgress | None:
    """``progress`` with the reference's runs named as parts of the one call: ``float64 reference``
    and ``float64 reference, burn-adam variant``."""
    if progress is None:
        return None

    def told(done: int, total: int, part: str | None = None) -> None:
        progress(done, total, f"float64 reference, {part}" if part else "float64 reference")

    return told


__all__ = ["LAYER_STATISTICS_ABOVE", "export_init", "record", "record_forward", "record_generate"]

"""The PyTorch forward recorder behind `burnside.torch.record_forward` and its float64 reference.

`record_forward_trace` runs a model's forward passes over N batches, with no optimizer and no
gradients, and writes a forward trace (metadata `kind = forward`, docs/trace-format.md): each
batch's inputs, the model's parameters and buffers once (as loaded), every submodule's first tensor
input (`layer_inputs`) and output (`activations`), and the model's outputs, named. A module of its
own so that `burnside.torch` and `burnside.recording.reference` (which re-runs it in float64) both import it
and not each other. Users call `burnside.torch.record_forward`; nothing here is public.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from burnside import __version__
from burnside.recording.loop import (_STATISTICS_RESERVE, LAYER_STATISTICS_ABOVE, Batch, ModuleHooks, _dropout_off,
                                  active_dropouts, check_full_steps, check_model, layer_statistics_for,
                                  nonpersistent_buffers, output_tensors, tied_names)
from burnside.recording.optim_state import host_array
from burnside.errors import BurnsideError
from burnside.trace import parse_name, tensor_name
from burnside.trace.dtypes import dtype_of
from burnside.trace.metadata import statistics_refusal
from burnside.trace.statistics import statistics_of
from burnside.trace.stream import open_writer

if TYPE_CHECKING:
    from burnside.progress import StepProgress

Forward = Callable[[nn.Module, Batch], object]


def batch_list(batches: Batch | Sequence[Batch]) -> list[Batch]:
    """``batches`` as a list of batches (one Mapping is one batch), each a Mapping of names to tensors;
    anything else is refused in one line."""
    if isinstance(batches, torch.Tensor):
        raise BurnsideError(f"batches is a Tensor {list(batches.shape)}, not a batch: give a batch as a dict of "
                            "names to tensors, e.g. {\"x\": x}, or a list of such dicts (one per forward pass)")
    if isinstance(batches, Mapping):
        per_batch = [batches]
    elif isinstance(batches, (str, bytes)) or not isinstance(batches, (Sequence, Iterator)):
        raise BurnsideError(f"batches is a {type(batches).__name__}: give one batch (a dict of names to tensors) "
                            "or a list of them")
    else:
        per_batch = list(batches)
    if not per_batch:
        raise BurnsideError("record_forward needs at least one batch")
    for k, batch in enumerate(per_batch):
        if not isinstance(batch, Mapping):
            raise BurnsideError(f"batch {k} is a {type(batch).__name__}, not a dict of names to tensors, e.g. "
                                "{\"x\": x}")
        for name, value in batch.items():
            if not isinstance(name, str) or not name:
                raise BurnsideError(f"batch {k} has the key {name!r}: name each input with a non-empty string")
            if not isinstance(value, torch.Tensor):
                raise BurnsideError(
                    f"batch {k}'s {name!r} is a {type(value).__name__}, not a tensor: a trace records tensors; "
                    f"pass a setting in forward=, e.g. forward=lambda m, b: m(b[\"x\"], {name}=...)")
    return per_batch


def check_forward_model(model: nn.Module) -> None:
    """Refuse, in one line, a model no forward trace can record: no parameters, on the meta device or a
    device the recorder cannot read (`check_model`; its parameters need not require grad)."""
    if not isinstance(model, nn.Module):
        raise BurnsideError(f"model is a {type(model).__name__}, not a torch.nn.Module")
    if not any(True for _ in model.parameters()):
        raise BurnsideError(f"the model ({type(model).__name__}) has no parameters: a forward trace checks that a "
                            "port loads and computes with the model's weights, so there is nothing to check; "
                            "record a model with at least one nn.Parameter")
    check_model(model, trainable=False)


def forward_statistics(model: nn.Module, statistics: bool | None, full_steps: Sequence[int] | None,
                       batches: int) -> list[int] | None:
    """The batches whose layers a forward trace records in full, or None when it records no statistics.

    ``statistics`` None is on for a model of at least `LAYER_STATISTICS_ABOVE` parameters (`record`'s rule), or
    when ``full_steps`` is given; ``full_steps`` defaults to ``[0, -1]`` (the first and the last batch) and counts
    negative indices from the end. Refused in one line: ``full_steps`` with ``statistics=False``, a batch the
    run does not have."""
    if statistics is not None and not isinstance(statistics, bool):
        raise BurnsideError(f"statistics must be True, False or None (None: True for a model of at least "
                            f"{LAYER_STATISTICS_ABOVE} parameters), not {statistics!r}")
    if statistics is False:
        if full_steps is not None:
            raise BurnsideError(f"full_steps={full_steps!r} with statistics=False: full_steps names the batches "
                                "whose layers are recorded in full when the others are statistics; drop it, or "
                                "pass statistics=True")
        return None
    on = statistics or full_steps is not None or layer_statistics_for(model, None)
    if not on:
        return None
    return check_full_steps([0, -1] if full_steps is None else full_steps, batches)


class ForwardStatisticsWriter:
    """A forward trace's writer that records the parameters (`step0.params_before.*`) and, at every batch not in
    ``full``, the layer inputs and activations as statistics (docs/trace-format.md, "Version 3: statistics"); the
    inputs, outputs and buffers always in full, and every tensor that may not be statistics (an integer layer
    input: token ids). Statistics are computed as each tensor is recorded, in chunks: nothing is held."""

    def __init__(self, writer, full: list[int]) -> None:
        self._writer = writer
        self._full = frozenset(full)
        self._count = 0
        self.path = writer.path

    def __enter__(self) -> ForwardStatisticsWriter:
        self._writer.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._writer.__exit__(*exc_info)

    def add(self, name: str, array: np.ndarray) -> None:
        array = np.asarray(array)
        parsed = parse_name(name)
        wanted = parsed is not None and (
            (parsed.stage == "params_before" and parsed.step == 0)
            or (parsed.stage in ("layer_inputs", "activations") and parsed.step not in self._full))
        if wanted:
            try:
                dtype = dtype_of(array)
            except ValueError:
                dtype = None  # the writer refuses it with its own message
            if dtype is not None and statistics_refusal(name, dtype, tuple(array.shape), True) is None:
                self._writer.add_statistics(name, statistics_of(array, dtype))
                return
        self._writer.add(name, array)

    def finish(self, metadata: Mapping) -> Path:
        return self._writer.finish(metadata)


def default_forward(model: nn.Module, batch: Batch) -> object:
    """``model(t)`` for a batch of one tensor, ``model(**batch)`` for several."""
    if len(batch) == 1:
        return model(next(iter(batch.values())))
    return model(**batch)


def record_forward_trace(
    model: nn.Module,
    batches: Batch | Sequence[Batch],
    path: str | Path,
    *,
    forward: Forward | None = None,
    eval: bool = True,  # noqa: A002 (the public argument's name)
    activations: bool = True,
    layer_inputs: bool = True,
    metadata: Mapping[str, object] | None = None,
    progress: StepProgress | None = None,
    statistics: bool | None = False,
    full_steps: Sequence[int] | None = None,
) -> Path:
    """Run ``model`` forward on each batch and write the forward trace to ``path``.

    `burnside.torch.record_forward` without its ``reference``: the arguments are documented there. A
    `.safetensors` trace is streamed (`burnside.trace.stream.TraceWriter`): each tensor is written as it is
    recorded, and the file appears at ``path`` only once complete (an error or an interrupt leaves none).
    """
    per_batch = batch_list(batches)
    check_forward_model(model)
    named = list(model.named_parameters())
    run = forward if forward is not None else default_forward
    n = len(per_batch)
    full = forward_statistics(model, statistics, full_steps, n)
    writer = _forward_writer(model, per_batch, path, named, full, metadata)
    with writer:
        for name, p in named:
            writer.add(tensor_name(0, "params_before", name), host_array(p))
        for name, b in model.named_buffers():
            writer.add(tensor_name(0, "buffers", name), host_array(b if b.is_floating_point() else b.long()))
        output_names: list[str] = []

        flags = [(module, module.training) for module in model.modules()]
        untouched = {name: b.detach().clone() for name, b in model.named_buffers()}
        if eval:
            model.eval()
        active = active_dropouts(model)
        restore = _dropout_off(model)
        mode = "train" if model.training else "eval"
        hooks = ModuleHooks(model, activations=activations, layer_inputs=layer_inputs) \
            if activations or layer_inputs else None
        if progress is not None:
            progress(0, n)
        try:
            with torch.no_grad():
                for k, batch in enumerate(per_batch):
                    _record_pass(writer, model, run, forward, hooks, k, batch, output_names)
                    if progress is not None:
                        progress(k + 1, n)
        finally:
            if hooks is not None:
                hooks.remove()
            for undo in restore:
                undo()
            for module, training in flags:
                module.training = training
            with torch.no_grad():  # a training-mode BatchNorm updated its statistics: the model is left as given
                for name, b in model.named_buffers():
                    if name in untouched:
                        b.copy_(untouched[name])
        meta = _forward_metadata(model, named, n, mode, output_names, active, hooks, full)
        meta.update(metadata or {})
        return writer.finish(meta)


def _forward_writer(model: nn.Module, per_batch: list[Batch], path: str | Path, named: list[tuple[str, nn.Parameter]],
                    full: list[int] | None, metadata: Mapping[str, object] | None):
    """The streamed writer of a forward trace, sized for its tensors and metadata (statistics with ``full``)."""
    n = len(per_batch)
    modules = [name for name, _ in model.named_modules() if name]
    expected = len(named) + len(list(model.named_buffers())) + n * (len(per_batch[0]) + 2 * len(modules) + 4)
    names_text = sum(len(name) + 4 for name, _ in named) + sum(len(name) + 24 for name in modules)
    reserve = 0 if full is None else _STATISTICS_RESERVE * (len(named) + (n - len(full)) * 2 * len(modules))
    writer = open_writer(path, expected_tensors=expected,
                         metadata_estimate=4 * names_text + len(str(dict(metadata or {}))) + reserve, forward=True)
    if full is not None:
        writer = ForwardStatisticsWriter(writer, full)
    return writer


def _record_pass(writer, model: nn.Module, run: Forward, forward: Forward | None, hooks: ModuleHooks | None, k: int,
                 batch: Batch, output_names: list[str]) -> None:
    """Forward pass ``k``: its inputs, the hooked layers' inputs and outputs, and its outputs (their names added to
    ``output_names`` in the order first seen)."""
    for name, t in batch.items():
        writer.add(tensor_name(k, "inputs", name), host_array(t))
    if hooks is None:
        output = run(model, batch)
    else:
        def sink(stage: str, key: str, tensor: torch.Tensor, k: int = k) -> None:
            writer.add(tensor_name(k, stage, key), host_array(tensor))

        with hooks.recording(sink):
            output = run(model, batch)
    for name, t in output_tensors(output, forward, k).items():
        writer.add(tensor_name(k, "outputs", name), host_array(t))
        if name not in output_names:
            output_names.append(name)


def _forward_metadata(model: nn.Module, named: list[tuple[str, nn.Parameter]], n: int, mode: str,
                      output_names: list[str], active: list[str], hooks: ModuleHooks | None,
                      full: list[int] | None) -> dict[str, object]:
    """A forward trace's metadata (docs/trace-format.md), before the caller's own."""
    # the model's dtype and device: its first float parameter's (an integer parameter's dtype is not the model's)
    first = next((p for _, p in named if p.is_floating_point()), named[0][1])
    meta: dict[str, object] = {
        "kind": "forward",
        "framework": "pytorch",
        "framework_version": torch.__version__,
        "device": str(first.device),
        "dtype": str(first.dtype).removeprefix("torch."),
        "steps": n,
        "params": [name for name, _ in named],
        "mode": mode,
        "outputs": output_names,
        "recorder": f"burnside {__version__}",
    }
    buffers = [name for name, _ in model.named_buffers()]
    if buffers:
        meta["buffers"] = buffers
    if nonpersistent_buffers(model):
        meta["buffers_nonpersistent"] = nonpersistent_buffers(model)
    if active:
        meta["dropout"] = "off"
    tied = tied_names(model)
    if tied:
        meta["tied"] = tied
    if hooks is not None:
        hooks.describe(meta)
    if full is not None:
        meta |= {"full_steps": full, "layer_statistics": False, "params_statistics": True}
    return meta


__all__ = ["ForwardStatisticsWriter", "batch_list", "check_forward_model", "default_forward", "forward_statistics",
           "output_tensors", "record_forward_trace"]

"""The PyTorch recording loop behind `burnside.torch.record` and `burnside.reference.record_reference`.

`record_trace` trains a model and writes every tensor of every step to a trace; the dropout
switches live here too, since both recorders need them (the optimizer's description and state:
`burnside.recording.optim_state`). A module of its own so that `burnside.torch` (which records the
reference first when asked) and `burnside.recording.reference` (which re-runs this loop in float64) both
import it and not each other. Users call `burnside.torch.record`; nothing here is public (`__all__`
lists what the two recorders import).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from burnside import __version__
from burnside.recording.loss import LossCall, merge_terms
from burnside.recording.optim_state import host_array, optimizer_config, optimizer_state, step_optimizer
from burnside.errors import BurnsideError
from burnside.trace import tensor_name
from burnside.trace.dtypes import dtype_of
from burnside.trace.metadata import statistics_refusal
from burnside.trace.names import micro_name, parse_name
from burnside.trace.statistics import Statistics, statistics_of
from burnside.trace.stream import open_writer

if TYPE_CHECKING:
    from burnside.progress import StepProgress

Batch = Mapping[str, torch.Tensor]

#: A model with at least this many parameters records its layer inputs and activations as statistics unless
#: told otherwise (``layer_statistics=None``).
LAYER_STATISTICS_ABOVE = 50_000_000
#: Header room reserved per tensor that may be recorded as statistics (its entry in metadata `statistics`).
_STATISTICS_RESERVE = 320


def loop_steps(batches: Batch | Sequence[Batch], steps: int | None, accumulate: int = 1) -> int:
    """The steps a loop of ``batches`` runs, as `record_trace` counts them (an invalid count is refused there)."""
    n = 1 if isinstance(batches, Mapping) else len(batches)  # type: ignore[arg-type]
    if steps is not None:
        return steps
    if type(accumulate) is int and accumulate > 1:
        return n // accumulate if n > 1 else 1
    return n


def check_full_steps(full_steps: Sequence[int] | None, steps: int) -> list[int] | None:
    """``full_steps`` as step indices, ascending and without repeats (negative ones count from the end: -1 is
    the last step); None stays None (every step in full). A step the loop does not have, or anything but a list
    of integers, is refused in one line, before anything runs."""
    if full_steps is None:
        return None
    if isinstance(full_steps, (str, bytes, Mapping)) or not isinstance(full_steps, (Sequence, set, frozenset)) \
            or not all(isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) for k in full_steps):
        raise BurnsideError(f"full_steps must be a list of step indices (e.g. [0, -1]: the first and the last), "
                            f"not {full_steps!r}")
    asked = [int(k) for k in full_steps]
    if steps < 1:  # no loop: refused as such by the recorder
        return sorted(set(asked))
    missing = [k for k in asked if not -steps <= k < steps]
    if missing:
        span = "0, or -1" if steps == 1 else f"0-{steps - 1}, or -{steps} to -1"
        raise BurnsideError(f"full_steps={asked}: the loop has {steps} step{'s' if steps != 1 else ''} ({span})")
    return sorted({k % steps for k in asked})


def layer_statistics_for(model: nn.Module, layer_statistics: bool | None) -> bool:
    """Whether layer inputs and activations are recorded as statistics: as asked, or (None) when the model has
    at least `LAYER_STATISTICS_ABOVE` parameters."""
    if layer_statistics is None:
        return sum(p.numel() for p in model.parameters()) >= LAYER_STATISTICS_ABOVE
    if not isinstance(layer_statistics, bool):
        raise BurnsideError(f"layer_statistics must be True, False or None (None: True for a model of at least "
                            f"{LAYER_STATISTICS_ABOVE} parameters), not {layer_statistics!r}")
    return layer_statistics


class StatisticsWriter:
    """A trace writer that records each tensor in full or as its statistics (docs/trace-format.md, "Version 3:
    statistics"): at a step not in ``full_steps`` (None: every step is full) every tensor that may be statistics
    is; with ``layer``, every step's `layer_inputs` and `activations` are too. Never statistics: inputs,
    `step0.params_before.*`, 0-d scalars, integer and bool tensors. The statistics are computed at once, in
    chunks (`statistics_of`): no tensor is held. With every step full and no layer statistics it writes exactly
    what the writer it wraps would."""

    def __init__(self, writer, full_steps: list[int] | None, layer: bool) -> None:
        self._writer = writer
        self._full = None if full_steps is None else frozenset(full_steps)
        self._layer = layer
        self._statistics: dict[str, Statistics] = {}
        self.path = writer.path

    def __enter__(self) -> StatisticsWriter:
        self._writer.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._writer.__exit__(*exc_info)

    @property
    def active(self) -> bool:
        return self._full is not None or self._layer

    def as_statistics(self, name: str, array: np.ndarray) -> bool:
        """Whether ``name`` (holding ``array``) is recorded as statistics."""
        if not self.active:
            return False
        parsed = parse_name(name)
        if parsed is None:
            return False
        layer = self._layer and parsed.stage in ("layer_inputs", "activations")
        if not layer and (self._full is None or parsed.step in self._full):
            return False
        try:
            dtype = dtype_of(array)
        except ValueError:
            return False  # the writer refuses it with its own message
        return statistics_refusal(name, dtype, tuple(array.shape)) is None

    def add(self, name: str, array: np.ndarray) -> None:
        array = np.asarray(array)
        if self.as_statistics(name, array):
            stats = statistics_of(array, dtype_of(array))
            self._writer.add_statistics(name, stats)
            self._statistics[name] = stats
        else:
            self._writer.add(name, array)

    def alias(self, name: str, target: str, source: Callable[[], np.ndarray]) -> None:
        """``name`` is bit-identical to ``target`` (recorded before) and holds ``source()`` (called only when
        needed): an alias when both are full, the target's statistics when both are statistics, else recorded
        from ``source()``."""
        if not self.active:
            self._writer.alias(name, target)
            return
        array = np.asarray(source())
        if self.as_statistics(name, array):
            stats = self._statistics.get(target)
            if stats is None:
                stats = statistics_of(array, dtype_of(array))
            self._writer.add_statistics(name, stats)
            self._statistics[name] = stats
        elif target in self._statistics:
            self._writer.add(name, array)
        else:
            self._writer.alias(name, target)

    def describe(self, meta: dict) -> None:
        """Metadata `full_steps` and `layer_statistics` (what was asked), when statistics recording is on."""
        if self.active:
            if self._full is not None:
                meta["full_steps"] = sorted(self._full)
            meta["layer_statistics"] = self._layer

    def finish(self, metadata: Mapping) -> Path:
        return self._writer.finish(metadata)


def statistics_reserve(per_step: int, steps: int, full_steps: list[int] | None, layer: bool, layers: int) -> int:
    """Header room for the metadata `statistics` of a loop: every tensor of each statistics step, and the layer
    tensors of the others."""
    if full_steps is None and not layer:
        return 0
    statistics_steps = steps - len(full_steps) if full_steps is not None else 0
    return _STATISTICS_RESERVE * (statistics_steps * per_step + (steps - statistics_steps) * layers * int(layer))

def check_model(model: nn.Module, *, trainable: bool = True) -> None:
    """Refuse, in one line and before anything is run or written, a model no recorder can record: no
    parameters (or, with ``trainable``, none that requires grad), a parameter or buffer on the meta device
    or on a device whose values cannot be read. A bfloat16 or float16 model is recorded in its own dtype."""
    named = list(model.named_parameters())
    if not named:
        raise BurnsideError(f"the model ({type(model).__name__}) has no parameters: a trace records a training "
                            "loop's parameters, gradients and optimizer state, so there is nothing to record; "
                            "record a model with at least one nn.Parameter")
    if trainable and not any(p.requires_grad for _, p in named):
        raise BurnsideError(f"none of the model's {len(named)} parameter(s) requires grad, so no step trains "
                            "anything: set requires_grad=True on the ones the loop trains")
    tensors = [("parameter", n, t) for n, t in named] + [("buffer", n, t) for n, t in model.named_buffers()]
    for what, name, t in tensors:
        if t.is_meta:
            raise BurnsideError(f"{what} {name!r} is on the meta device (a shape without values), so there is "
                                "nothing to record: materialise the model first, e.g. model.to_empty(device='cpu') "
                                "and then load_state_dict(...) or initialise its weights")
    for what, name, t in tensors:
        if t.device.type != "cpu":
            try:
                t.detach().flatten()[:1].cpu()
            except (RuntimeError, NotImplementedError) as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise BurnsideError(f"{what} {name!r} is on device {t.device}, which the recorder cannot read "
                                    f"({first}): record the model on the CPU, model.cpu()") from None


def tied_names(model: nn.Module) -> dict[str, str]:
    """Each other name of a parameter reachable under several (``lm_head.weight = wte.weight``) -> the name
    `named_parameters()` lists it under (its first): {"lm_head.weight": "wte.weight"}."""
    first: dict[int, str] = {}
    tied: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            tied[name] = first[id(p)]
        else:
            first[id(p)] = name
    return tied


def nonpersistent_buffers(model: nn.Module) -> list[str]:
    """The buffers registered with ``persistent=False`` (a causal mask kept as a constant), in
    `named_buffers()` order: constants of the module, outside its ``state_dict``, which a port may compute
    inline rather than hold."""
    constant = {f"{prefix}.{name}" if prefix else name
                for prefix, module in model.named_modules() for name in module._non_persistent_buffers_set}
    return [name for name, _ in model.named_buffers() if name in constant]


def _shown(value: object) -> str:
    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def output_tensors(output: object, forward: Callable | None, k: int) -> dict[str, torch.Tensor]:
    """The tensors of what forward pass ``k`` returned, by output name (docs/trace-format.md):
    one tensor is `output`; a tuple or list `0`, `1`, ...; a dict (a ModelOutput) its keys; nested
    ones joined with `.`; None values skipped. Anything else is refused in one line naming it and where."""
    who = "the model's forward" if forward is None else "forward(model, batch)"
    found: dict[str, torch.Tensor] = {}

    def refuse(value: object, at: str) -> BurnsideError:
        where = f" at output{at}" if at else ""
        fix = ("make forward return only the tensors, e.g. forward=lambda m, b: m(**b)[0]" if at
               else "make forward return the model's output tensors")
        return BurnsideError(f"{who} returned {_shown(value)}{where} (batch {k}), which a trace cannot "
                             f"record: it records tensors and tuples, lists and dicts of them (None is skipped); {fix}")

    def walk(value: object, name: str, at: str) -> None:
        if isinstance(value, torch.Tensor):
            key = name or "output"
            if key in found:
                raise BurnsideError(f"{who} returned two outputs both named {key!r} (batch {k}): name each output "
                                    "once (a dict key holding a '.' can clash with a nested name)")
            found[key] = value
        elif value is None and at:
            return
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{name}.{key}" if name else str(key), f"{at}[{key!r}]")
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                walk(item, f"{name}.{i}" if name else str(i), f"{at}[{i}]")
        else:
            raise refuse(value, at)

    walk(output, "", "")
    if not found:
        raise BurnsideError(f"{who} returned {_shown(output)} holding no tensor (batch {k}): a trace "
                            "records the model's outputs, so return at least one tensor")
    return found


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


def _first_tensor(output: object) -> torch.Tensor | None:
    """A module's output as one tensor: itself, or the first tensor of a tuple or list."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        return next((o for o in output if isinstance(o, torch.Tensor)), None)
    return None


class ModuleHooks:
    """Hooks on every submodule handing, while a pass is recorded, its first tensor input (a pre-hook: the
    input as the module received it, before an in-place layer overwrites it) and its output to a sink,
    ``sink(stage, key, tensor)`` with stage `layer_inputs` or `activations`, at once (the sink writes or
    copies it before the pass goes on).

    Keys are module paths; a module called a second time in one pass gets `{module}#2`, and its input and
    output are that call's. `burnside.torch.record` (``layer_inputs=``) and `record_forward` both use it."""

    def __init__(self, model: nn.Module, *, activations: bool, layer_inputs: bool) -> None:
        self.activations, self.layer_inputs = activations, layer_inputs
        self.output_order: list[str] = []
        self.input_order: list[str] = []
        self.modules: dict[str, str] = {}
        self._sink: Callable[[str, str, torch.Tensor], None] | None = None
        self._calls: dict[str, int] = {}
        self._open: dict[str, list[str]] = {}
        self._types = {name: type(module).__name__ for name, module in model.named_modules() if name}
        self._settings = {name: s for name, module in model.named_modules() if name and (s := module_settings(module))}
        #: each recorded module's configured settings (`eps`, `stride`, ...), where it has any
        self.settings: dict[str, dict] = {}
        self._handles = []
        for name, module in model.named_modules():
            if not name:
                continue
            self._handles.append(module.register_forward_pre_hook(self._before(name), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._after(name)))

    def _before(self, name: str):
        def hook(_module: nn.Module, args: tuple, kwargs: dict) -> None:
            if self._sink is None:
                return
            calls = self._calls[name] = self._calls.get(name, 0) + 1
            key = name if calls == 1 else f"{name}#{calls}"
            self._open.setdefault(name, []).append(key)
            if not self.layer_inputs:
                return
            tensor = _first_tensor(args)
            if tensor is None:
                tensor = next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
            if tensor is None:
                return  # a module fed no tensor (a PackedSequence, only settings) has no layer input
            if key not in self.input_order:
                self.input_order.append(key)
                self.modules[key] = self._types[name]
                if name in self._settings:
                    self.settings[key] = self._settings[name]
            self._sink("layer_inputs", key, tensor)
        return hook

    def _after(self, name: str):
        def hook(_module: nn.Module, _args: tuple, output: object) -> None:
            if self._sink is None:
                return
            stack = self._open.get(name)
            if not stack:
                return
            key = stack.pop()
            tensor = _first_tensor(output)
            if not self.activations or tensor is None:
                return
            if key not in self.output_order:
                self.output_order.append(key)
                self.modules[key] = self._types[name]
                if name in self._settings:
                    self.settings[key] = self._settings[name]
            self._sink("activations", key, tensor)
        return hook

    @contextmanager
    def recording(self, sink: Callable[[str, str, torch.Tensor], None]) -> Iterator[None]:
        """Record one pass: every hooked input and output goes to ``sink`` as the pass runs."""
        self._sink, self._calls, self._open = sink, {}, {}
        try:
            yield
        finally:
            self._sink = None

    def describe(self, meta: dict) -> None:
        """Add `activations`, `layer_inputs` and `modules` (those recorded) to a trace's metadata."""
        if self.output_order:
            meta["activations"] = self.output_order
        if self.input_order:
            meta["layer_inputs"] = self.input_order
        if self.modules:
            meta["modules"] = self.modules
        if self.settings:
            meta["module_settings"] = self.settings

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


#: A module's attributes that configure what it computes, recorded as the trace's `module_settings`: what a layer
#: measurement says A was configured with, where floats cannot tell (an epsilon below float32's resolution).
_SETTINGS = ("eps", "variance_epsilon", "momentum", "stride", "padding", "dilation", "kernel_size", "groups",
             "output_padding", "approximate", "negative_slope", "ceil_mode", "count_include_pad", "num_heads",
             "padding_idx", "dim", "head_dim", "num_key_value_groups", "scaling",
             "rope_type")


def module_settings(module: nn.Module) -> dict:
    """The configured settings of ``module`` among `_SETTINGS` that are plain numbers, strings or tuples of ints."""
    found = {}
    for key in _SETTINGS:
        value = getattr(module, key, None)
        if isinstance(value, bool) or value is None:
            if isinstance(value, bool):
                found[key] = value
            continue
        if isinstance(value, (int, float, str)):
            found[key] = value
        elif isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            found[key] = list(value)
    return found


def _dropouts_on(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of each dropout of ``model`` that is on: `nn.Dropout*` modules, then the attention
    dropout of `nn.MultiheadAttention`s, in training mode with a probability above 0."""
    modules = list(model.named_modules())
    return ([(n, m) for n, m in modules if isinstance(m, nn.modules.dropout._DropoutNd) and m.training and m.p > 0]
            + [(n, m) for n, m in modules if isinstance(m, nn.MultiheadAttention) and m.training and m.dropout > 0])


def active_dropouts(model: nn.Module) -> list[str]:
    """The dropouts of ``model`` that are on: `drop (p=0.1)`, `attn (attention dropout 0.1)`."""
    return [f"{name} (attention dropout {module.dropout:g})" if isinstance(module, nn.MultiheadAttention)
            else f"{name} (p={module.p:g})" for name, module in _dropouts_on(model)]


def _dropout_off(model: nn.Module) -> list[Callable[[], None]]:
    """Turn every dropout of ``model`` that is on off; the returned calls turn each back as it was."""
    undo: list[Callable[[], None]] = []
    for _, module in _dropouts_on(model):
        if isinstance(module, nn.MultiheadAttention):
            undo.append(lambda m=module, p=module.dropout: setattr(m, "dropout", p))
            module.dropout = 0.0
        else:
            module.eval()
            undo.append(lambda m=module: m.train())
    return undo


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


__all__ = ["LAYER_STATISTICS_ABOVE", "StatisticsWriter", "check_full_steps", "layer_statistics_for", "loop_steps",
           "Batch", "ModuleHooks", "active_dropouts", "check_model", "default_forward", "loss_name",
           "nonpersistent_buffers",
           "host_array", "LoopSettings", "record_trace", "tied_names"]

"""How a torch.optim optimizer is described in a trace: its kind, its settings per parameter group, and
its state under the trace's slot names (docs/trace-format.md). Shared by `burnside.torch.record` and the
float64 reference; nothing here is public.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import torch

from burnside.errors import BurnsideError
from burnside.optimizers import OPTIMIZERS, SLOTS, by_torch_class
from burnside.trace.dtypes import as_bf16

#: The float dtypes a tensor is recorded in as it is; any other is recorded as float32.
_OWN_DTYPES = (torch.float64, torch.bfloat16, torch.float16)


#: The torch dtypes a trace holds (docs/trace-format.md, Dtypes).
_HELD_DTYPES = frozenset({torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                          torch.int16, torch.int8, torch.uint64, torch.uint32, torch.uint16, torch.uint8, torch.bool})


def optimizer_kind(optimizer: torch.optim.Optimizer) -> str:
    """The optimizer's class name, or the torch.optim class it subclasses without changing its step
    (a subclass that only adds a constructor or a name computes what its base computes)."""
    # a subclass before its base (torch.optim.AdamW subclasses Adam)
    bases = sorted((getattr(torch.optim, o.torch_class) for o in OPTIMIZERS.values()), key=lambda c: -len(c.__mro__))
    for base in bases:
        if isinstance(optimizer, base) and same_step(type(optimizer), base):
            return base.__name__
    return type(optimizer).__name__


def same_step(kind: type, base: type) -> bool:
    """Whether optimizer class ``kind`` steps with ``base``'s ``step`` (torch wraps each class's step
    in a profiling hook, so the functions are compared unwrapped)."""
    return inspect.unwrap(kind.step) is inspect.unwrap(base.step)


def optimizer_config(optimizer: torch.optim.Optimizer, names: Mapping[int, str] | None = None) -> dict:
    """The optimizer's full configuration as trace metadata: the first parameter group's settings and, with
    more groups and ``names`` (id of a parameter -> its name), ``groups``: each group's parameters and the
    settings where it differs from the first (docs/trace-format.md)."""
    kind = optimizer_kind(optimizer)
    groups = optimizer.param_groups
    known = by_torch_class(kind)
    for key in known.constructor_settings if known is not None else ():
        # read from the constructor whatever a group says (`Optimizer.constructor_settings`)
        groups = [{**g, key: optimizer.defaults[key]} for g in groups]
    config = _group_config(kind, groups[0])
    if len(optimizer.param_groups) > 1:
        config["param_groups"] = len(optimizer.param_groups)
        if names is not None:
            config["groups"] = [
                {"params": [names[id(p)] for p in group["params"] if id(p) in names],
                 **{k: v for k, v in _group_config(kind, group).items() if k != "name" and config.get(k) != v}}
                for group in groups]
    return config


def _group_config(kind: str, group: Mapping) -> dict:
    known = by_torch_class(kind)
    if known is not None:
        config = known.torch_settings(group)
    else:
        # an optimizer burnside does not know: its class and what its group says (numbers, flags, names, and
        # lists of numbers such as betas), recorded as read; the comparison says it cannot replay it
        plain = {k: v for k, v in group.items() if k != "params" and isinstance(v, (int, float, bool, str))
                 and not (isinstance(v, float) and not math.isfinite(v))}
        plain.update({k: [float(x) for x in v] for k, v in group.items()
                      if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, float)) and not
                                                                    isinstance(x, bool) and math.isfinite(x)
                                                                    for x in v)})
        config = {"name": kind.lower(), "class": kind, **plain}
    return config


def _never_stepped(state: Mapping) -> bool:
    """Whether ``state`` is what Adagrad's constructor made (``step`` 0): burn keeps no state for a parameter
    before its first update, and neither does any other torch.optim optimizer."""
    step = state.get("step")
    return step is not None and float(step) == 0.0


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A detached CPU copy of ``t`` as a numpy array; bfloat16 as its raw 16-bit words (numpy has no such type),
    marked as BF16 (`burnside.trace.dtypes.as_bf16`) so that it is written as BF16."""
    try:
        t = t.detach().cpu()
    except (RuntimeError, NotImplementedError) as exc:
        raise BurnsideError(f"a tensor on device {t.device} cannot be read by the recorder "
                            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}): "
                            "record the model on the CPU, model.cpu()") from None
    if t.dtype not in _HELD_DTYPES:
        raise BurnsideError(f"a {t.dtype} tensor cannot be recorded: a trace holds float64, float32, float16, "
                            "bfloat16, integer and bool tensors; convert it, e.g. .float()")
    if t.dtype == torch.bfloat16:
        return as_bf16(t.resolve_conj().resolve_neg().contiguous().view(torch.int16).numpy().copy())
    return t.numpy().copy()


def host_array(t: torch.Tensor) -> np.ndarray:
    """``t``'s values as a numpy array to write at once: a view of a CPU tensor's own memory (no copy; the
    writer writes or copies it before the loop computes on; bfloat16 as its raw words, `to_numpy`), a detached
    CPU copy (`to_numpy`) otherwise."""
    if t.device.type == "cpu" and t.layout == torch.strided and not t.is_conj() and not t.is_neg():
        try:
            if t.dtype == torch.bfloat16:
                return as_bf16(t.detach().view(torch.int16).numpy())
            return t.detach().numpy()
        except (RuntimeError, TypeError):
            pass
    return to_numpy(t)


def optimizer_state(optimizer: torch.optim.Optimizer, names_by_param: Mapping[int, str]
                    ) -> Iterator[tuple[str, np.ndarray]]:
    """The optimizer's state after a step as trace tensors: (``{slot}.{param}``, array), PyTorch's slot names; an
    array may be a view of the state itself (`host_array`), to be written before the optimizer steps again.

    A float64 reference keeps its state in float64; a number (a step count) is an f32 scalar.
    """
    known = by_torch_class(optimizer_kind(optimizer))
    unused = known.unused_slots if known is not None else ()
    for p, state in optimizer.state.items():
        pname = names_by_param.get(id(p))
        if pname is None:
            continue  # a parameter of another module: the recorded model never sees it
        if _never_stepped(state):
            continue  # Adagrad's state from its constructor, of a parameter no step updated yet
        for slot in (s for s in SLOTS if s not in unused):
            value = state.get(slot)
            if isinstance(value, torch.Tensor):
                # a half model's state in its own dtype (torch.optim keeps it in the parameters'), as burn's is
                state_value = value if value.dtype in _OWN_DTYPES else value.float()
                yield f"{slot}.{pname}", host_array(state_value)  # written before the next step changes it
            elif isinstance(value, (int, float)):
                yield f"{slot}.{pname}", np.array(value, dtype=np.float32)


def step_optimizer(optimizer: torch.optim.Optimizer, closure: Callable[[], torch.Tensor]) -> None:
    """Take one optimizer step. ``closure`` re-evaluates the loss (zero grads, forward, loss, backward) for an
    optimizer whose ``step`` needs it (``torch.optim.LBFGS``); every other optimizer steps on the gradients
    the loop computed."""
    if isinstance(optimizer, torch.optim.LBFGS):
        optimizer.step(closure)
    else:
        optimizer.step()


__all__ = ["host_array", "optimizer_config", "optimizer_kind", "optimizer_state", "same_step", "step_optimizer",
           "to_numpy"]

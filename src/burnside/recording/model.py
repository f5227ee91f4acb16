"""What every PyTorch recorder reads from a model or does to it, apart from its passes: the refusal of a model
no recorder can record, its tied parameters and constant buffers, the tensors of what its forward returned, and
the dropout switches (dropout is off while recording). Shared by the training loop, the forward recorder and
`burnside.torch.export_init`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from burnside.errors import BurnsideError

Batch = Mapping[str, torch.Tensor]


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


__all__ = ["Batch", "active_dropouts", "check_model", "nonpersistent_buffers", "output_tensors", "tied_names"]

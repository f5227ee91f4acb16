"""The module hooks of a recorded pass: every submodule's first tensor input (`layer_inputs`) and output
(`activations`), the modules' classes, and their configured settings (`module_settings`). Used by the training
loop (``layer_inputs=``, ``activations=``) and the forward recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn


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


__all__ = ["ModuleHooks", "module_settings"]

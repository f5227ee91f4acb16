"""Forward traces for the diagnosis tests, recorded from real PyTorch computations.

Side A is a PyTorch model recorded as `burnside.torch.record_forward` records it: each module's
first tensor input (`layer_inputs`) and output (`activations`), the parameters and buffers as
loaded, metadata `modules`. Side B stands for a burn port: the same tensors computed by PyTorch
code that carries the port's fault, written without `layer_inputs` and `modules` (a burn port
records its taps under PyTorch's module paths), with `mode` `inference` or `autodiff`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from burnside.trace import write_trace


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return next((t for t in (_first_tensor(v) for v in value) if t is not None), None)
    return None


def record_forward_trace(model: nn.Module, batches: Sequence[Mapping[str, torch.Tensor]], path: Path, *,
                         side: str = "a", mode: str | None = None, layer_inputs: bool | None = None,
                         framework: str | None = None, dtype: torch.dtype | None = None,
                         forward: Callable | None = None) -> Path:
    """Run ``model`` over ``batches`` under no_grad, as it stands (train or eval: the caller sets it),
    and write a forward trace. ``side="a"``: PyTorch's trace (layer inputs, modules); ``side="b"``: a
    burn port's (neither). ``dtype``: run a float64 copy and write its tensors rounded to float32
    (a correct port whose sums round differently)."""
    is_a = side == "a"
    layer_inputs = is_a if layer_inputs is None else layer_inputs
    if dtype is not None:
        import copy
        model = copy.deepcopy(model).to(dtype)
    names = {m: n for n, m in model.named_modules() if n}
    tensors: dict[str, np.ndarray] = {}
    order: list[str] = []
    inputs_recorded: list[str] = []
    step = [0]

    def keep(t: torch.Tensor) -> np.ndarray:
        return t.detach().to(torch.float32).numpy().copy() if t.is_floating_point() else t.detach().numpy().copy()

    def hook(module, args, output):
        name = names[module]
        out, inp = _first_tensor(output), _first_tensor(args)
        if out is None:
            return
        if name not in order:
            order.append(name)
        tensors[f"step{step[0]}.activations.{name}"] = keep(out)
        if layer_inputs and inp is not None:
            if name not in inputs_recorded:
                inputs_recorded.append(name)
            tensors[f"step{step[0]}.layer_inputs.{name}"] = keep(inp)

    handles = [m.register_forward_hook(hook) for m in names]
    for n, p in model.named_parameters():
        tensors[f"step0.params_before.{n}"] = keep(p)
    for n, b in model.named_buffers():
        tensors[f"step0.buffers.{n}"] = keep(b)
    try:
        with torch.no_grad():
            for k, batch in enumerate(batches):
                step[0] = k
                batch = {n: (t.to(dtype) if dtype is not None and t.is_floating_point() else t)
                         for n, t in batch.items()}
                for n, t in batch.items():
                    tensors[f"step{k}.inputs.{n}"] = keep(t)
                out = forward(model, batch) if forward is not None else model(*batch.values())
                tensors[f"step{k}.outputs.output"] = keep(out)
    finally:
        for h in handles:
            h.remove()
    metadata = {
        "framework": framework or ("pytorch" if is_a else "burn"),
        "framework_version": torch.__version__ if is_a else "0.22.1",
        "device": "cpu", "dtype": "float32", "steps": len(batches), "kind": "forward",
        "params": [n for n, _ in model.named_parameters()],
        "buffers": [n for n, _ in model.named_buffers()],
        "activations": order, "outputs": ["output"],
        "mode": mode or ("eval" if is_a else "inference"),
    }
    if is_a:
        metadata["modules"] = {n: type(m).__name__ for m, n in names.items()}
    if layer_inputs:
        metadata["layer_inputs"] = inputs_recorded
    return write_trace(path, tensors, metadata)

"""Worked examples, each a PyTorch model recorded here and a burn port in rust/.

Each module has ``record_torch(path, *, steps) -> Path`` (deterministic weights and data, CPU)
and ``BURN_BIN``, the port's binary in the crate of the same name under rust/, which follows
the `burnside check` contract (``BIN --init INIT -o OUT --steps N``). A1 (`a1.py`, the seed's MLP) is the
exception: its ``record_torch`` also takes the optimizer, and its burn side is `burnside.burn.a1` (rust/a1
builds its own start, bit-identical to the PyTorch side's), so it has no ``BURN_BIN``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def record_example(name: str, model: Any, optimizer: Any, batches: Any, path: Path, *, steps: int,
                   reference: bool, progress: Any = None, **loop: Any) -> Path:
    """Record example ``name``'s loop at ``path``: the float32 trace, or with ``reference`` its float64 referee
    from the same start; ``loop`` holds the loop's other arguments (``clip_grad_norm``, ``lr_schedule``)."""
    from burnside.recording.reference import record_reference
    from burnside.torch import record

    return (record_reference if reference else record)(model, optimizer, batches, path, steps=steps,
                                                       metadata={"model": name}, progress=progress, **loop)


def record_pretrained(name: str, model: Any, checkpoint: Path, batches: Any, path: Path, *, reference: bool,
                      progress: Any = None) -> Path:
    """An inference example's PyTorch side: ``model`` (pretrained) saved with ``torch.save`` at ``checkpoint``,
    loaded back into a fresh copy, and its eval-mode forward passes over ``batches`` recorded at ``path`` (with
    ``reference``, by a float64 copy: the referee of `compare --reference`). The model recorded is the one read
    back from the file, so the trace holds exactly what the checkpoint does."""
    import copy

    import torch

    from burnside.recording.reference import record_forward_reference
    from burnside.torch import record_forward

    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    partial = checkpoint.with_name(checkpoint.name + ".partial")
    torch.save(model.state_dict(), partial)
    partial.replace(checkpoint)  # a port never reads a half-written file
    loaded = copy.deepcopy(model)
    loaded.load_state_dict(torch.load(checkpoint, weights_only=True))
    record = record_forward_reference if reference else record_forward
    return record(loaded, batches, path, metadata={"model": name}, progress=progress)

"""Worked examples beyond A1, each a PyTorch model recorded here and a burn port in rust/.

Each module has ``record_torch(path, *, steps) -> Path`` (deterministic weights and data, CPU)
and ``BURN_BIN``, the port's binary in the crate of the same name under rust/, which follows
the `burnside check` contract (``BIN --init INIT -o OUT --steps N``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def record_example(name: str, model: Any, optimizer: Any, batches: Any, path: Path, *, steps: int,
                   reference: bool, progress: Any = None, **loop: Any) -> Path:
    """Record example ``name``'s loop at ``path``: the float32 trace, or with ``reference`` its float64 referee
    from the same start; ``loop`` holds the loop's other arguments (``clip_grad_norm``, ``lr_schedule``)."""
    from burnside.reference import record_reference
    from burnside.torch import record

    return (record_reference if reference else record)(model, optimizer, batches, path, steps=steps,
                                                       metadata={"model": name}, progress=progress, **loop)

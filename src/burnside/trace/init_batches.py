"""The batches of an init file: `inputs.{name}` for step 0, `step{k}.inputs.{name}` for step k >= 1.

An init file holds one batch when every step trains on the same one, and one batch per step
when the PyTorch side fed a different batch at some step (a data loader, a replay buffer).
Step 0's batch keeps the plain `inputs.{name}` names either way, so a port that reads only
`inputs.*` still reads both kinds of file (docs/trace-format.md, "Init files").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from burnside.errors import BurnsideError


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two tensors are one tensor bit for bit: -0.0 is not +0.0 and NaN payloads count, as in the comparison
    of inputs."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def batch_tensors(batches: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The init file's input tensors for ``batches`` (one per step, or one for every step).

    Batches bit-identical to step 0's are written once, as `inputs.{name}`; as soon as one step's
    batch differs, every step k >= 1 gets `step{k}.inputs.{name}`, so a reader finds step k's
    batch by its number alone.
    """
    if not batches:
        raise BurnsideError("an init file needs at least one batch")
    first = batches[0]
    for k, batch in enumerate(batches[1:], 1):
        if list(batch) != list(first):
            raise BurnsideError(f"step {k}'s batch has the inputs {list(batch)}, step 0's {list(first)}; "
                                "every step's batch needs the same names")
    tensors = {f"inputs.{name}": np.asarray(value) for name, value in first.items()}
    if all(same_bits(batch[name], first[name]) for batch in batches[1:] for name in first):
        return tensors
    for k, batch in enumerate(batches[1:], 1):
        tensors |= {f"step{k}.inputs.{name}": np.asarray(value) for name, value in batch.items()}
    return tensors


__all__ = ["batch_tensors", "same_bits"]

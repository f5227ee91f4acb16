"""Which buffers of a trace are constants: persistent buffers the run never changed (a positional table, a causal
mask kept in the state_dict), which a port may compute inline. The comparison lists them in one line instead of
failing on them, and an init file made from a training trace carries them (`constant_buffers`)."""

from __future__ import annotations

import numpy as np

from burnside.trace.names import parse_name
from burnside.trace.trace import Trace


#: A norm's running statistics: buffers a module changes as it runs, state the port must hold.
_RUNNING = ("running_mean", "running_var", "num_batches_tracked")


def unchanged_buffers(trace: Trace, names: list[str], constant: set[str]) -> set[str]:
    """The persistent buffers among ``names`` (one side's only) that are constants: no norm's running statistic,
    and the same value at every step ``trace`` records them (a forward trace records them once)."""
    steps: dict[str, list[str]] = {}
    for name in names:
        buffer = buffer_of(name)
        if buffer is not None and buffer not in constant and buffer.rsplit(".", 1)[-1] not in _RUNNING:
            steps.setdefault(buffer, []).append(name)
    found: set[str] = set()
    for buffer, recorded in steps.items():
        if any(n not in trace for n in recorded):
            continue  # held as statistics only: its values cannot be told apart
        first = trace.array(recorded[0])
        if all(np.array_equal(first, trace.array(n)) for n in recorded[1:]):
            found.add(buffer)
    return found


def buffer_of(name: str) -> str | None:
    """`h.0.attn.bias` for `step3.buffers.h.0.attn.bias`; None for a tensor of another stage."""
    parsed = parse_name(name)
    return parsed.rest if parsed is not None and parsed.stage == "buffers" else None

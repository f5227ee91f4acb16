"""A side that trained on step 0's batch again where the other fed a new one (the evidence D006 names)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from burnside.trace import Trace, parse_name
from burnside.trace.init_batches import same_bits


@dataclass(frozen=True)
class RepeatedBatch:
    """One side trained on step 0's batch again at steps where the other fed a different batch.

    The usual cause is a port that reads the init file's first batch once, before its loop,
    while the PyTorch loop drew a batch per step (a data loader, a replay buffer).
    """

    side: str  # "a" or "b": the side that repeated step 0's batch
    steps: tuple[int, ...]


def find_repeated_batch(a: Trace, b: Trace, mismatched: list[str]) -> RepeatedBatch | None:
    """The side that fed step 0's batch again at the steps whose inputs differ (``mismatched``: the
    names of the shared-start tensors that are not bit-identical), if one side did."""
    steps = sorted({p.step for p in (parse_name(n) for n in mismatched)
                    if p is not None and p.stage == "inputs" and p.step > 0})
    if not steps:
        return None
    def inputs(trace: Trace) -> dict[int, list[str]]:
        by_step: dict[int, list[str]] = {}
        for n in trace.names:
            parsed = parse_name(n)
            if parsed is not None and parsed.stage == "inputs":
                by_step.setdefault(parsed.step, []).append(n)
        return by_step

    by_trace = {id(a): inputs(a), id(b): inputs(b)}

    def reuses_first(trace: Trace, step: int) -> bool:
        present = by_trace[id(trace)]
        names, firsts = present.get(step, []), set(present.get(0, []))
        pairs = [(n, "step0." + n.split(".", 1)[1]) for n in names]
        return bool(pairs) and all(first in firsts and _bits_equal(trace, n, first) for n, first in pairs)

    for side, own, other in (("b", b, a), ("a", a, b)):
        repeated = tuple(k for k in steps if reuses_first(own, k) and not reuses_first(other, k))
        if repeated:
            return RepeatedBatch(side, repeated)
    return None


def _bits_equal(trace: Trace, name: str, other: str) -> bool:
    try:
        return same_bits(np.asarray(trace.array(name)), np.asarray(trace.array(other)))
    finally:
        trace.release(name)
        trace.release(other)

"""Questions the diagnosis rules ask of the traces, answered from the tensors themselves."""

from __future__ import annotations

import numpy as np

from burnside.trace import Trace, tensor_name


def params_unchanged(trace: Trace, step: int) -> bool | None:
    """True when every recorded parameter after `step` equals its value before, bit for bit.

    None when the trace does not hold both stages for that step.
    """
    names = [(tensor_name(step, "params_before", p), tensor_name(step, "params_after", p)) for p in _params(trace)]
    names = [(b, a) for b, a in names if b in trace and a in trace]
    if not names:
        return None
    return all(np.array_equal(trace.array(b).view(np.uint8), trace.array(a).view(np.uint8)) for b, a in names)


def grads_nonzero(trace: Trace, step: int) -> bool:
    """Any recorded gradient element at `step` is non-zero."""
    return any(np.any(trace.array(n) != 0) for n in trace.names if n.startswith(f"step{step}.grads."))


def grads_len(trace: Trace, step: int) -> int | None:
    """How many parameters got a gradient at `step` (metadata, else counted from the tensors)."""
    recorded = trace.metadata.get("grads_len")
    if isinstance(recorded, list) and step < len(recorded):
        return int(recorded[step])
    present = [n for n in trace.names if n.startswith(f"step{step}.grads.")]
    return len(present) if any(n.startswith(f"step{step}.") for n in trace.names) else None


def optim_step_count(trace: Trace, step: int) -> float | None:
    """The optimizer's own step counter after `step` (Adam's `step` slot), if recorded."""
    counters = [n for n in trace.names if n.startswith(f"step{step}.optim.step.")]
    if not counters:
        return None
    return float(np.max(trace.values(counters[0])))


def steps_of(trace: Trace) -> range:
    """The step indices a trace covers."""
    return range(max(trace.steps, 1))


def _params(trace: Trace) -> list[str]:
    if trace.params:
        return trace.params
    prefix = "step0.params_before."
    return [n[len(prefix):] for n in trace.names if n.startswith(prefix)]

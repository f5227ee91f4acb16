"""Whether a float64 reference may judge a trace: it is no side to compare, and it starts where the
trace does (same inputs, same step-0 parameters, same optimizer settings and loss).

`burnside.pipeline` runs these once, before anything is built or compared; `compare_traces` trusts the
reference it is given.
"""

from __future__ import annotations

import math

import numpy as np

from burnside.compare.reference_file import Reference
from burnside.errors import TraceError
from burnside.optimizers.settings import same_setting
from burnside.trace import Trace, parse_name


def refuse_reference(trace: Trace, role: str, fix: str) -> None:
    """Raise TraceError when ``trace`` is a float64 reference given where ``role`` belongs.

    A reference (`burnside.reference.record_reference`, metadata `reference = float64`) is a
    trace in the same format, so it opens as one; as a side it would hand a port float64
    weights or be compared as if a framework had computed it.
    """
    if trace.metadata.get("reference") == "float64":
        raise TraceError(f"{trace.path} is a float64 reference (burnside.reference.record_reference), "
                         f"not {role}: {fix}")


def refuse_statistics_reference(a: Trace, b: Trace, reference: Reference) -> None:
    """Raise TraceError when ``reference`` holds only the statistics of a tensor both traces hold in full: it
    could not judge that tensor, which the sides' full values could (record the reference with the traces'
    `full_steps`)."""
    held = reference.trace.statistics
    if not held:
        return
    full_b = set(b.names)
    for name in a.names:  # pipeline order: the earliest such tensor is named
        if name in held and name in full_b:
            raise TraceError(f"the reference holds only statistics of {name}, which both traces hold in full: "
                             "record the reference with the traces' full_steps")


#: Elements per chunk when the reference's start is checked against a trace's.
_START_CHUNK = 1 << 20


def check_start(trace: Trace, reference: Reference) -> None:
    """Raise TraceError unless ``reference`` starts where ``trace`` does: every input and step 0's
    parameters equal, value for value, once widened to float64 (exact for float32 and float16).

    A reference recorded from another seed, other batches or a model already trained would judge
    both sides by a run they never made, and could pass a real bug as rounding noise."""
    ref = reference.trace
    if ref.kind != trace.kind:
        raise TraceError(f"{reference.path} is a reference of a {ref.kind} run and {trace.path} a {trace.kind} trace: "
                         "record the reference of the same kind (burnside.reference.record_reference for a training "
                         "loop, record_forward(..., reference=PATH) for forward passes), or leave out --reference")
    if trace.metadata.get("framework") == "pytorch":
        _check_same_loop(trace, reference)
    for name in trace.names:
        parsed = parse_name(name)
        if parsed is None or not parsed.is_shared_start or name not in ref:
            continue
        if ref.info(name).shape != trace.info(name).shape:
            raise TraceError(f"{reference.path} does not start where {trace.path} does: {name} has shape "
                             f"{list(ref.info(name).shape)} there, {list(trace.info(name).shape)} in the trace; "
                             "record the reference from the same model and batches (burnside.reference."
                             "record_reference), or leave out --reference")
        x, r = trace.values(name).reshape(-1), ref.values(name).reshape(-1)
        differing, worst = 0, 0.0
        for start in range(0, x.size, _START_CHUNK):
            xs = np.asarray(x[start:start + _START_CHUNK], dtype=np.float64)
            rs = np.asarray(r[start:start + _START_CHUNK], dtype=np.float64)
            off = ~((xs == rs) | (np.isnan(xs) & np.isnan(rs)))
            if off.any():
                differing += int(np.count_nonzero(off))
                with np.errstate(invalid="ignore"):
                    worst = max(worst, float(np.nanmax(np.abs(xs[off] - rs[off]), initial=0.0)))
        trace.release(name)
        ref.release(name)
        if differing:
            raise TraceError(
                f"{reference.path} does not start where {trace.path} does: {name} differs in {differing} of "
                f"{x.size} elements (up to {worst:.3g}); record the reference from the same model, weights and "
                "batches as the trace, before training (burnside.reference.record_reference), or leave out "
                "--reference")
    for name in trace.statistics:  # a forward trace's parameters recorded as statistics
        parsed = parse_name(name)
        if parsed is None or not parsed.is_shared_start or not (name in ref or name in ref.statistics):
            continue
        mine, theirs = trace.statistics[name], ref.statistics_of(name)
        # a float32 tensor widened to float64 keeps its values, so its sums in float64 (summed in the same order)
        # and its largest magnitude are the reference's exactly
        if mine.shape != theirs.shape or (mine.mean, mine.norm, mine.max_abs, mine.nonfinite) != (
                theirs.mean, theirs.norm, theirs.max_abs, theirs.nonfinite):
            raise TraceError(
                f"{reference.path} does not start where {trace.path} does: {name} (recorded as statistics) has "
                f"mean {theirs.mean:.9g}, norm {theirs.norm:.9g}, shape {list(theirs.shape)} there, mean "
                f"{mine.mean:.9g}, norm {mine.norm:.9g}, shape {list(mine.shape)} in the trace; record the reference "
                "from the same model and batches (record_forward(..., reference=PATH)), or leave out --reference")
    if trace.metadata.get("framework") == "pytorch":
        _check_same_loss(trace, reference)


#: What a reference must share with the PyTorch trace it judges, besides its start: the optimizer's
#: settings (a reference of lr 2e-3 judges a run of lr 1e-3 by a run it never made) and the loss.
_SAME_OPTIMIZER = ("name", "lr", "betas", "eps", "weight_decay", "weight_decay_kind", "momentum", "dampening",
                   "nesterov", "amsgrad", "clip_grad_norm", "lr_per_step")


def _check_same_loop(trace: Trace, reference: Reference) -> None:
    ref = reference.trace
    ours, theirs = trace.optimizer, ref.optimizer
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in _SAME_OPTIMIZER:
            a, r = ours.get(key), theirs.get(key)
            if not same_setting(a, r):
                raise TraceError(
                    f"{reference.path} is not a reference of {trace.path}'s loop: its optimizer has {key} "
                    f"{_setting(r)}, the trace's {_setting(a)}; record the reference with the same optimizer settings "
                    "and arguments as the trace (burnside.reference.record_reference), or leave out --reference")
    loss_a, loss_r = trace.metadata.get("loss_fn"), ref.metadata.get("loss_fn")
    if isinstance(loss_a, str) and isinstance(loss_r, str) and loss_a != loss_r:
        raise TraceError(f"{reference.path} is not a reference of {trace.path}'s loop: its loss is {loss_r}, the "
                         f"trace's {loss_a}; record the reference with the same loss_fn, or leave out --reference")


def _check_same_loss(trace: Trace, reference: Reference) -> None:
    """The loss's options (label smoothing, class weights, a reduction) are not in the metadata; its first
    value is: from the same start (checked before this), float32 and float64 agree on it far better."""
    ref = reference.trace
    first = "step0.loss"
    if first in trace and first in ref and trace.info(first).n == 1 and ref.info(first).n == 1:
        ours, theirs = float(trace.values(first).reshape(-1)[0]), float(ref.values(first).reshape(-1)[0])
        # relative, with an absolute floor for a loss near zero, whose float32 value is mostly rounding
        if math.isfinite(ours) and math.isfinite(theirs) and abs(ours - theirs) > _SAME_LOSS * abs(theirs) + 1e-6:
            raise TraceError(
                f"{reference.path} is not a reference of {trace.path}'s loop: its first loss is {theirs:.6g}, the "
                f"trace's {ours:.6g} from the same start: another loss (label smoothing, class weights, reduction) or "
                "forward; record the reference with the trace's loss_fn and forward, or leave out --reference")


#: The relative gap between a trace's and its reference's first loss beyond which they are two losses: a
#: float32 forward from the same start is within ~1e-6 of the float64 one (A1: 1.4e-7 relative).
_SAME_LOSS = 1e-3


def _setting(value: object) -> str:
    return "none" if value is None else f"{value!r}"

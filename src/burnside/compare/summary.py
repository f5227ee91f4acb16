"""`TraceSummary`: what the diagnosis and the report need of one trace, gathered while comparing.

A `Comparison` keeps these instead of the traces, so the diagnosis rules never go back to the raw
arrays (and a multi-GB trace can be closed once compared). The report does, for a few tensors: one
tensor's distribution of differences and the float64 reference's losses (`burnside.report.distribution`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from burnside.trace import TensorName, Trace, parse_name
from burnside.trace.dtypes import FLOATS
from burnside.trace.statistics import Statistics


@dataclass
class TraceSummary:
    """One side of a comparison: identity, declared configuration, and per-step evidence."""

    path: Path
    framework: str
    framework_version: str
    steps: int
    optimizer: dict
    params: list[str]
    metadata: dict
    #: step -> every params_after equals its params_before bit for bit (None: not recorded)
    params_unchanged: dict[int, bool] = field(default_factory=dict)
    #: step -> any recorded gradient element is non-zero
    grads_nonzero: dict[int, bool] = field(default_factory=dict)
    #: step -> how many parameters got a gradient (metadata `grads_len`, else counted)
    grads_len: dict[int, int] = field(default_factory=dict)
    #: step -> the optimizer's own step counter after the step (Adam's `step` slot)
    optim_step_count: dict[int, float] = field(default_factory=dict)
    #: step -> the loss before the step
    losses: dict[int, float] = field(default_factory=dict)
    #: the first tensor in pipeline order (of the logits, outputs, loss, gradients, parameters after a step,
    #: optimizer state and loss after) holding a NaN or an infinity: where this side's run diverged
    first_nonfinite: str | None = None

    @property
    def diverged_at(self) -> int | None:
        """The step at which this side's run holds its first non-finite value, or None when it never does."""
        parsed = parse_name(self.first_nonfinite) if self.first_nonfinite else None
        return parsed.step if parsed is not None else None

    @property
    def name(self) -> str:
        """`pytorch (a1.torch.safetensors)`: how the reports name this side."""
        return f"{self.framework} ({self.path.name})"

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"path": str(self.path), "framework": self.framework, "framework_version": self.framework_version,
                "steps": self.steps, "optimizer": self.optimizer}


def summarize(trace: Trace) -> TraceSummary:
    """Read one trace's evidence: per-step grads, params before/after, optimizer counter, loss.

    Reads only the tensors of those stages, one at a time, releasing each mapped tensor after.
    The metadata's types were checked when the trace was opened (burnside.trace.metadata).
    """
    metadata = trace.metadata
    summary = TraceSummary(
        path=trace.path,
        framework=trace.framework,
        framework_version=str(metadata.get("framework_version", "")),
        steps=trace.steps,
        optimizer=trace.optimizer,
        params=trace.params,
        metadata=dict(metadata),
    )
    recorded_len = metadata.get("grads_len")
    counted: dict[int, int] = {}
    nonfinite_steps: set[int] = set()
    held = trace.statistics
    for name in trace.held_names:
        parsed = parse_name(name)
        if parsed is None:
            continue
        k = parsed.step
        counted.setdefault(k, 0)
        if name in held:
            _note_statistics(trace, parsed, name, held, summary, nonfinite_steps)
            counted[k] += parsed.stage == "grads"
            continue
        finite = True
        if trace.info(name).dtype in FLOATS and (
                parsed.stage == "params_after" or (summary.first_nonfinite is None and parsed.stage in _DIVERGING)):
            finite = _finite(trace, name)
            if not finite and summary.first_nonfinite is None:
                summary.first_nonfinite = name
        if parsed.stage == "grads":
            counted[k] += 1
            flat = trace.values(name).reshape(-1)
            nonzero = any(bool(np.any(flat[s:s + _CHUNK] != 0)) for s in range(0, flat.size, _CHUNK))  # in chunks
            summary.grads_nonzero[k] = summary.grads_nonzero.get(k, False) or nonzero
            trace.release(name)
        elif parsed.stage == "params_after":
            if finite:
                _note_unchanged(trace, parsed, name, summary)
            else:  # a NaN's bits staying put says nothing of an update
                nonfinite_steps.add(k)
        elif parsed.stage == "optim" and parsed.slot == "step":
            values = trace.values(name)
            if values.size:
                count = float(np.max(values))
                summary.optim_step_count[k] = max(summary.optim_step_count.get(k, count), count)
        elif parsed.stage == "loss":
            values = trace.values(name)
            if values.size == 1:
                summary.losses[k] = float(values.reshape(-1)[0])
    for k in nonfinite_steps:  # NaN parameters are not "unchanged" because their bits are: unknown
        summary.params_unchanged.pop(k, None)
    for k, n in counted.items():
        summary.grads_len[k] = n
        if recorded_len is not None and k < len(recorded_len):
            summary.grads_len[k] = recorded_len[k]
    return summary


#: The stages whose values show a run diverging (read here anyway, or small).
_DIVERGING = frozenset({"logits", "outputs", "micro_logits", "micro_loss", "loss", "grads", "params_after", "optim",
                        "loss_after"})


def _note_statistics(trace: Trace, parsed: TensorName, name: str, held: dict[str, Statistics], summary: TraceSummary,
                     nonfinite_steps: set[int]) -> None:
    """What a tensor held as statistics only tells: a non-finite count, a gradient that is not all zero, parameters
    whose hash after the step is their hash before it (never a loss or an optimizer counter: 0-d, always full)."""
    stats = held[name]
    if stats.nonfinite and summary.first_nonfinite is None and parsed.stage in _DIVERGING:
        summary.first_nonfinite = name
    if parsed.stage == "grads":
        summary.grads_nonzero[parsed.step] = summary.grads_nonzero.get(parsed.step, False) or stats.max_abs != 0
    elif parsed.stage == "params_after":
        if stats.nonfinite:
            nonfinite_steps.add(parsed.step)
            return
        before = f"step{parsed.step}.params_before.{parsed.rest}"
        if before not in held and before not in trace:
            return
        previous = trace.statistics_of(before)
        summary.params_unchanged[parsed.step] = (summary.params_unchanged.get(parsed.step, True)
                                                 and stats.same_bits(previous))


def _finite(trace: Trace, name: str) -> bool:
    """Whether every value of tensor ``name`` is finite (read in chunks)."""
    flat = trace.values(name).reshape(-1)
    finite = all(bool(np.isfinite(flat[s:s + _CHUNK]).all()) for s in range(0, flat.size, _CHUNK))
    trace.release(name)
    return finite


_CHUNK = 1 << 20


def _note_unchanged(trace: Trace, parsed: TensorName, name: str, summary: TraceSummary) -> None:
    """Whether a parameter's (finite) values after the step are its values before, bit for bit."""
    before = f"step{parsed.step}.params_before.{parsed.rest}"
    if before not in trace or trace.info(before) != trace.info(name):
        return
    x, y = trace.array(before).reshape(-1).view(np.uint8), trace.array(name).reshape(-1).view(np.uint8)
    # chunk by chunk: a whole tensor's `==` is a bool array of its bytes (147 MiB for a GPT-2's embedding)
    same = x.size == y.size and all(np.array_equal(x[s:s + 8 * _CHUNK], y[s:s + 8 * _CHUNK])
                                    for s in range(0, x.size, 8 * _CHUNK))
    trace.release(before)
    trace.release(name)
    summary.params_unchanged[parsed.step] = summary.params_unchanged.get(parsed.step, True) and same

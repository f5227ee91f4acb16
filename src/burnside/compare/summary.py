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
    for name in trace.names:
        parsed = parse_name(name)
        if parsed is None:
            continue
        k = parsed.step
        counted.setdefault(k, 0)
        if parsed.stage == "grads":
            counted[k] += 1
            nonzero = bool(np.any(trace.values(name) != 0))
            summary.grads_nonzero[k] = summary.grads_nonzero.get(k, False) or nonzero
            trace.release(name)
        elif parsed.stage == "params_after":
            _note_unchanged(trace, parsed, name, summary)
        elif parsed.stage == "optim" and parsed.slot == "step":
            values = trace.values(name)
            if values.size:
                count = float(np.max(values))
                summary.optim_step_count[k] = max(summary.optim_step_count.get(k, count), count)
        elif parsed.stage == "loss":
            values = trace.values(name)
            if values.size == 1:
                summary.losses[k] = float(values.reshape(-1)[0])
    for k, n in counted.items():
        summary.grads_len[k] = n
        if recorded_len is not None and k < len(recorded_len):
            summary.grads_len[k] = recorded_len[k]
    return summary


def _note_unchanged(trace: Trace, parsed: TensorName, name: str, summary: TraceSummary) -> None:
    before = f"step{parsed.step}.params_before.{parsed.rest}"
    if before not in trace or trace.info(before) != trace.info(name):
        return
    same = bool(np.array_equal(trace.array(before).view(np.uint8), trace.array(name).view(np.uint8)))
    trace.release(before)
    trace.release(name)
    summary.params_unchanged[parsed.step] = summary.params_unchanged.get(parsed.step, True) and same

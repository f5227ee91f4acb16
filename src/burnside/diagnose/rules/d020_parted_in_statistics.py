"""D020 sides part where only statistics were recorded.

## What it does
In a failing comparison of traces that hold some tensors as statistics only
(`record(..., full_steps=[0, -1])`, `layer_statistics=True`: format version 3), finds the
sides parting in such a tensor before anything compared in full shows it: the first statistics
row proven out of tolerance that comes, in pipeline order, before every full tensor out of
tolerance; or, with none, a full tensor out of tolerance (a step's loss, a 0-d scalar always
recorded in full) after statistics of its own step that differ, so that what a rule would read
there (the step's parameters, its layers, its logits) is not known to agree. It names the step,
the tensor (a layer's class), which stages of the step before it agree and which differ
unproven, the first part of the step proven to differ (the forward pass, the loss, the backward
pass, the update), and the `full_steps` or `layer_statistics=False` that record it in full. The
rules that read a cause at the first full divergence (D002, D008, D010, D011, D012, D013, D015,
D017, D019) are not reported with it; a rule that names a cause from the metadata or from one
side's own numbers (D001, D004, D005, D009, D018) is, in its place.

## Why is this bad?
Statistics (mean, norm, largest magnitude, a hash) show where two runs part, not why: no rule
can fit an epsilon, replay an update or recompute a loss from them. A bug that first acts at a
step recorded as statistics (an optimizer rebuilt inside the loop, whose state restarts every
step; a learning-rate schedule the port lacks; a batch statistic updated otherwise) shows in
full only at a later step, where everything already differs; a rule reading that step's loss
against its unrecorded logits would name the loss function.

## Example
```python
record(model, optimizer, batches, "traces/torch.safetensors", steps=4, full_steps=[0, -1])
# step 0 agrees; the port's optimizer is built inside its loop, so step 1 parts, in statistics
```

## Use instead
```python
record(model, optimizer, batches, "traces/torch.safetensors", steps=4, full_steps=[0, 1, -1])
# step 1 in full (the port follows the init file): the rules name what parts there
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.compare.statistics_parting import statistics_parting_first
from burnside.compare.statistics_rows import OUT_OF_TOLERANCE
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity
from burnside.trace import parse_name

ID = "D020"
NAME = "parted-in-statistics"
TITLE = "sides part where only statistics were recorded"
SEVERITY = Severity.ERROR
PRECEDENCE = 210  # statistics only: the least precise name, last
#: rules that read a cause at the first divergence compared in full, or from a step's logits and loss agreeing
SUPERSEDES = ("D002", "D008", "D010", "D011", "D012", "D013", "D015", "D017", "D019")
#: a parting is where to look, not a cause: a rule that names one from the metadata or its own side's numbers
#: (an optimizer setting, a discarded step) says more
ONLY_ALONE = True

#: What parting first at each stage of a step says, in the step's order.
_PART = {
    "layer_inputs": "the forward pass", "activations": "the forward pass", "logits": "the forward pass",
    "outputs": "the forward pass", "micro_logits": "the forward pass",
    "loss": "the loss", "micro_loss": "the loss",
    "grads": "the backward pass",
    "params_after": "the update", "optim": "the update", "buffers": "the layers' running state",
    "params_before": "the parameters the step starts from",
}


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis when the sides part first in a tensor held as statistics."""
    first = statistics_parting_first(comparison)
    if (first is None or comparison.passed or comparison.start_mismatch or comparison.structure
            or comparison.loading):
        return []
    parsed = parse_name(first.name)
    if parsed is None:
        return []
    k, unit = parsed.step, comparison.unit
    kind = comparison.module_class(first.name)
    shown = f"{comparison.display_name(first.name)}{f' ({kind})' if kind else ''}"
    agree, unjudged = _stages_before(comparison, first.name, k)
    full = comparison.first_divergence_name
    if first.verdict == OUT_OF_TOLERANCE:
        evidence = (f"the sides part at {unit} {k} in a tensor recorded as statistics only: {shown} differs by at "
                    f"least {first.lower_bound:.2e}, beyond the {first.allowed:.2e} the tolerance allows (proven from "
                    "the statistics)")
        if agree:
            evidence += f"; before it, {unit} {k}'s {agree} agree"
        if unjudged:
            whose = "its" if agree else f"before it, {unit} {k}'s"
            evidence += (f"; {whose} {unjudged} differ, not provably beyond the tolerance (statistics cannot tell "
                         "rounding from a bug)")
        evidence += f"; {_PART.get(parsed.stage, 'this stage')} is the first part of the step proven to differ"
        if full is not None:
            evidence += (f"; the first tensor compared in full out of tolerance, {comparison.display_name(full)}, "
                         "comes after it, where the sides already differ")
    else:
        evidence = (f"{comparison.display_name(full)} is out of tolerance, and before it {unit} {k}'s tensors recorded "
                    f"as statistics only differ from {shown} on (by at least {first.lower_bound:.2e}; statistics "
                    "cannot tell rounding from a bug), so whether what the rules would read there (the step's "
                    "parameters, its layers, its logits) agrees is not known")
    return [Diagnosis(ID, TITLE, evidence, _fix(comparison, k, parsed.stage))]


def _stages_before(comparison: Comparison, name: str, k: int) -> tuple[str, str]:
    """The stages of step ``k`` before ``name`` in pipeline order (a layer's recorded input aside): those whose every
    tensor agrees (a full one within tolerance, a statistics one bit-identical), and the others, e.g.
    (`inputs and params_before`, `activations and logits`)."""
    at = comparison.order.get(name, 0)
    agree = {r.name: r.passed for r in comparison.rows} | {s.name: s.bit_identical for s in comparison.statistics}
    stages: dict[str, bool] = {}
    own = parse_name(name)
    for other, place in sorted(comparison.order.items(), key=lambda item: item[1]):
        parsed = parse_name(other)
        if place >= at or parsed is None or parsed.step != k or parsed.stage == "layer_inputs" or other not in agree:
            continue
        stage = f"earlier {parsed.stage}" if own is not None and parsed.stage == own.stage else parsed.stage
        stages[stage] = stages.get(stage, True) and agree[other]
    return _and([s for s, ok in stages.items() if ok]), _and([s for s, ok in stages.items() if not ok])


def _and(words: list[str]) -> str:
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def _fix(comparison: Comparison, k: int, stage: str) -> str:
    """What to record in full: step ``k``, where a side recorded it as statistics, and the layers, where a side
    recorded them as statistics at every step (`layer_statistics`)."""
    sides = (comparison.a, comparison.b)
    steps = [side.metadata.get("full_steps") for side in sides]
    steps = [s for s in steps if isinstance(s, list)]  # a side without `full_steps` recorded every step in full
    options = []
    if any(k not in s for s in steps):
        options.append(f"full_steps={sorted({k, *(i for s in steps for i in s if type(i) is int)})}")
    if stage in ("activations", "layer_inputs") and any(side.metadata.get("layer_statistics") is True
                                                        for side in sides):
        options.append("layer_statistics=False")
    unit = comparison.unit
    what = f"the layers' inputs and outputs of {unit} {k}" if options == ["layer_statistics=False"] else f"{unit} {k}"
    how = (f"`{', '.join(options)}` in the PyTorch side's `record(...)`" if options
           else "in the PyTorch side's `record(...)`")
    return (f"record {what} in full, {how} (the burn port records what its "
            f"init file says: `burnside check` hands it the new one), and compare again: the rules name a cause "
            f"only from full tensors, and {unit} {k} is where to look")

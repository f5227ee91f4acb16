"""D016 run diverged.

## What it does
Finds the first step at which a side's run holds a non-finite value (NaN or infinity) in its
logits, loss, gradients, parameters after the step or optimizer state, and names that side,
that step and that tensor.

## Why is this bad?
A run that diverges proves nothing from there on: NaN parameters keep their bits from step to
step (which would read as an update that never landed), a NaN is no distance, and the fits of the
optimizer's settings have nothing to fit. A port that diverges where PyTorch trains has parted
earlier (a learning rate, a loss summed where it is averaged, a missing normalisation): the first
divergence before it is the cause. A PyTorch run that diverges is no reference to prove a port by.

## Example
```rust
// PyTorch: loss = F.cross_entropy(logits, y)            (the mean over the batch)
let loss = CrossEntropyLossConfig::new().init(&device).forward(logits, y) * batch_size as f32;
```

## Use instead
```rust
let loss = CrossEntropyLossConfig::new().init(&device).forward(logits, y); // the mean, as PyTorch's
// and a PyTorch loop that diverges itself: record fewer steps (`--steps`) or a learning rate that trains
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D016"
NAME = "run-diverged"
TITLE = "run diverged to NaN or infinity"
SEVERITY = Severity.ERROR
PRECEDENCE = 30  # a run gone non-finite proves nothing after it: before the rules that read its numbers


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis naming each side whose run holds a non-finite value, where it first does."""
    if comparison.forward:
        return []
    sides = [(s, summary) for s, summary in (("a", comparison.a), ("b", comparison.b)) if summary.first_nonfinite]
    if not sides:
        return []
    parts = []
    follows = False
    for side, summary in sides:
        parts.append(f"{comparison.side_name(side)} diverged at step {summary.diverged_at}: "
                     f"{summary.first_nonfinite} is its first tensor holding NaN or infinity")
    if len(sides) == 2:
        first = min(s.diverged_at for _, s in sides)
        fix = (f"both runs diverge, so what is compared from step {first} on is no proof of parity: record both sides "
               f"over the steps before it (`--steps {max(first, 1)}`) or with a learning rate that trains")
    else:
        side, summary = sides[0]
        other = comparison.b if side == "a" else comparison.a
        parts.append(f"{other.framework}'s values stay finite")
        if summary.framework == "pytorch":
            fix = (f"the PyTorch run diverges itself and is no reference: record both sides over the steps before "
                   f"step {summary.diverged_at} (`--steps {max(summary.diverged_at, 1)}`) or with a learning rate "
                   "that trains")
        else:
            follows = True  # the cause is the earlier divergence another rule names: listed after it
            fix = (f"the port diverges where {other.framework} trains, so it parted earlier: fix the first divergence "
                   f"before step {summary.diverged_at} (the rows above; a learning rate, a loss summed where PyTorch "
                   "averages it, a missing normalisation), and the values that blow up follow from it")
    return [Diagnosis(ID, TITLE, "; ".join(parts), fix, follows=follows)]

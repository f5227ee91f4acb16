"""D003 optimizer state advanced without the model.

## What it does
Finds an optimizer whose own step counter (Adam's `step`/burn's `time`) advanced over
steps whose parameter updates never landed in the model.

## Why is this bad?
burn's optimizer keeps its state per `ParamId`. A discarded step (`optim.step(lr,
model.clone(), grads)`) still stores that step's moments: once the code is fixed, the
same optimizer carries the moments of steps the model never took, and training
drifts away from a fresh run (the seed measured 1.4e-3 in loss after 5 Adam steps).

## Example
```rust
for _ in 0..3 { optim.step(0.01, model.clone(), grads_of(&model)); }
model = optim.step(0.01, model, grads_of(&model)); // fixed, same optim
```

## Use instead
```rust
let mut optim = AdamConfig::new().with_epsilon(1e-8).init(); // a new optimizer after the fix
model = optim.step(0.01, model, grads);
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D003"
NAME = "optimizer-state-without-model"
TITLE = "optimizer state advanced without the model"
SEVERITY = Severity.ERROR
PRECEDENCE = 150  # the optimizer's state without the model: before how the update is computed


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per side whose optimizer counted steps the model did not take."""
    found = []
    for side in (comparison.a, comparison.b):
        dropped = [k for k, unchanged in sorted(side.params_unchanged.items()) if unchanged]
        if not dropped:
            continue
        last = dropped[-1]
        count = side.optim_step_count.get(last)
        if count is not None and count >= last + 1:
            found.append(Diagnosis(
                ID, TITLE,
                f"{side.name}: the optimizer's step count is {count:g} after step {last}, "
                f"though the parameters did not change in step(s) {', '.join(map(str, dropped))}",
                "fix the discarded step (D001), then build a new optimizer: the old one holds moments "
                "of updates the model never took",
            ))
    return found

"""D001 optimizer step result discarded.

## What it does
Finds steps after which one side's parameters are bit-identical to what they were
before the step, although that side computed non-zero gradients and the other side's
parameters moved. A step at which either run holds NaN or infinity is left to D016 (run
diverged): a NaN keeps its bits through any update.

## Why is this bad?
burn's `optim.step(lr, model, grads)` takes the module by value and returns the
updated one. Code ported from PyTorch often drops that result, usually after rustc's
E0382/E0507 suggested `.clone()`: it compiles without a warning, and the loss never
moves. With Adam the optimizer state advances anyway (see D003).

## Example
```rust
optim.step(0.1, model.clone(), grads);
```

## Use instead
```rust
model = optim.step(0.1, model, grads);
// inside fn(model: &mut Mlp, ...):
*model = optim.step(lr, model.clone(), grads);
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D001"
NAME = "step-result-discarded"
TITLE = "optimizer step result discarded"
SEVERITY = Severity.ERROR
PRECEDENCE = 140  # the update not applied: before how it is computed


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per side whose updates never landed."""
    found = []
    for side, other in ((comparison.a, comparison.b), (comparison.b, comparison.a)):
        # a step with NaN or infinity on either side (a diverged run: D016) is no evidence: NaN keeps its bits
        stuck = [k for k, unchanged in sorted(side.params_unchanged.items())
                 if unchanged and side.grads_nonzero.get(k) and other.params_unchanged.get(k) is False
                 and not _diverged_by(side, k) and not _diverged_by(other, k)]
        if not stuck:
            continue
        steps = ", ".join(map(str, stuck))
        found.append(Diagnosis(
            ID, TITLE,
            f"{side.name}: parameters after step {steps} are bit-identical to before, "
            f"with non-zero gradients, while {other.framework}'s moved",
            "assign the step's result: `model = optim.step(lr, model, grads);` "
            "(in a `&mut` helper: `*model = optim.step(lr, model.clone(), grads);`); "
            "`burnside lint` finds the line (BS001)",
        ))
    return found


def _diverged_by(summary, k: int) -> bool:
    return summary.diverged_at is not None and summary.diverged_at <= k

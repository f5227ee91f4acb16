"""D021 optimizer state restarts.

## What it does
Reads each side's optimizer step counter (`optim.step.*`, Adam's and AdamW's `step`, burn's
`time`: a 0-d scalar, recorded in full at every step) and finds a step after the first at which
one side's counter did not advance while the other's did, and while that side's parameters
moved: its optimizer started that step from a fresh state (moments, momentum, squared averages
and the step count all anew), as an optimizer built inside the training loop does. It names the
side, the step and both counters.

## Why is this bad?
burn's optimizers keep their state inside the `ModuleOptimizer` value: a port that writes
`let mut optim = AdamConfig::new().init();` inside its loop (or rebuilds it to change a
setting) throws the state away every step. Step 0 agrees with PyTorch exactly, since both start
fresh, and every later step differs: Adam's bias correction restarts at t = 1, its moments at
zero, SGD's momentum buffer at the gradient. The loss still goes down, so nothing warns.

## Example
```rust
for k in 0..steps {
    let mut optim = AdamConfig::new().with_epsilon(1e-8).init(); // a new state at every step
    // ...
    model = optim.step(lr, model, grads);
}
```

## Use instead
```rust
let mut optim = AdamConfig::new().with_epsilon(1e-8).init(); // once, before the loop
for k in 0..steps {
    // ...
    model = optim.step(lr, model, grads);
}
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D021"
NAME = "optimizer-state-restarts"
TITLE = "optimizer state restarts"
SEVERITY = Severity.ERROR
PRECEDENCE = 160  # the state restarting: before the update difference it explains (D009)
#: D009's "no setting of that optimizer explains it" and D020's "the update parts first" are this, named
SUPERSEDES = ("D009", "D020")


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per side whose optimizer counter stops advancing where the other side's advances."""
    if comparison.forward:
        return []
    found = []
    for side, other in ((comparison.a, comparison.b), (comparison.b, comparison.a)):
        counts, others = side.optim_step_count, other.optim_step_count
        for k in sorted(counts):
            if k == 0 or k - 1 not in counts or k not in others or k - 1 not in others:
                continue
            if side.params_unchanged.get(k) or (side.diverged_at is not None and side.diverged_at <= k):
                continue  # no update landed (D001, D003), or NaN from here on (D016)
            if counts[k] <= counts[k - 1] and others[k] > others[k - 1]:
                found.append(Diagnosis(
                    ID, TITLE,
                    f"{side.name}: the optimizer's step count is {counts[k]:g} after step {k}, as after step "
                    f"{k - 1} ({counts[k - 1]:g}), while its parameters moved; {other.name}'s went from "
                    f"{others[k - 1]:g} to {others[k]:g}: the optimizer started step {k} from a fresh state "
                    "(its moments and its step count anew)",
                    "build the optimizer once, before the training loop (`let mut optim = spec.init();` outside "
                    "the `for`), and keep the value `optim.step` is called on: its state must carry over from "
                    "step to step, as PyTorch's optimizer's does",
                ))
                break
    return found

"""## What it does

Flags an optimizer that is stepped again after one of its step results was
discarded (a BS001 site) in the same function, and a discarded step inside a
loop, which the loop repeats.

## Why is this bad?

Each `step` advances the optimizer's state (Adam's moments and step count,
momentum buffers) for the parameters it was given. When the updated module was
thrown away, the next step applies that advanced state to the old parameters:
the optimizer and the model have drifted apart, so even after fixing the first
step, the training no longer matches PyTorch's.

## Example

```rust
for _ in 0..epochs {
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optim.step(1e-3, model.clone(), grads);
}
```

## Use instead

```rust
for _ in 0..epochs {
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    model = optim.step(1e-3, model, grads);
}
```
"""

from __future__ import annotations

from burnside.lint.finding import Hit, Severity
from burnside.lint.step_sites import step_sites
from burnside.lint.syntax import SourceUnit

ID = "BS003"
NAME = "optimizer-reused-after-discarded-step"
SEVERITY = Severity.WARNING
TITLE = "optimizer is stepped again after a discarded step"


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (a.start_byte, a.end_byte) == (b.start_byte, b.end_byte)


def check(unit: SourceUnit):
    sites = step_sites(unit)
    reported: set[int] = set()
    for site in sites:
        if not site.discarded:
            continue
        line = site.call.start_point.row + 1
        if site.in_loop and site.call.start_byte not in reported:
            reported.add(site.call.start_byte)
            yield Hit(
                node=site.call,
                message=f"`{site.receiver}` is stepped again on every loop iteration while its result is discarded",
                help="the optimizer state advances each iteration but the module never changes; assign the step result",
            )
        for later in sites:
            if (
                _same(later.function, site.function)
                and later.call.start_byte > site.call.end_byte
                and later.receiver == site.receiver
                and later.call.start_byte not in reported
            ):
                reported.add(later.call.start_byte)
                yield Hit(
                    node=later.call,
                    message=f"{TITLE}: `{site.receiver}` advanced its state at line {line} without the module",
                    help=f"assign the result of the step at line {line}, so optimizer state and module stay in step",
                )

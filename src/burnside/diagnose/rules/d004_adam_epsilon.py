"""D004 Adam epsilon differs between the sides.

## What it does
Compares the `eps` of the two sides' Adam/AdamW configurations.

## Why is this bad?
burn's `AdamConfig::new()` defaults to `epsilon = 1e-5`; PyTorch's `Adam` uses `1e-8`.
The update `m / (sqrt(v) + eps)` then differs wherever `sqrt(v)` is small, and the
port drifts from the first step without any error.

## Example
```rust
let mut optim = AdamConfig::new().init();
```

## Use instead
```rust
let mut optim = AdamConfig::new().with_epsilon(1e-8).init();
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis, number
from burnside.rule import Severity

ID = "D004"
NAME = "adam-epsilon"
TITLE = "Adam epsilon differs"
SEVERITY = Severity.ERROR
PRECEDENCE = 170  # a declared setting: before the update difference it explains (D009)


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis when both sides use Adam-family optimizers with different eps."""
    a, b = comparison.a.optimizer, comparison.b.optimizer
    if a.get("name") not in ("adam", "adamw") or b.get("name") not in ("adam", "adamw"):
        return []
    eps_a, eps_b = number(a.get("eps")), number(b.get("eps"))
    if eps_a is None or eps_b is None or eps_a == eps_b:
        return []
    return [Diagnosis(
        ID, TITLE,
        f"{comparison.a.framework} eps={eps_a:g}, {comparison.b.framework} eps={eps_b:g}",
        f"give the burn side PyTorch's epsilon: `OptimizerSpec::{b.get('name')}(lr)` has it (1e-8), and "
        f"`.with_eps({eps_a:g})` sets another; a burn optimizer built by hand needs it explicitly: "
        f"`{'AdamWConfig' if b.get('name') == 'adamw' else 'AdamConfig'}::new().with_epsilon({eps_a:g})` "
        "(burn's default is 1e-5, PyTorch's 1e-8)",
    )]

"""## What it does

Flags a `MuonConfig::new()` whose value becomes an optimizer (`.init()`,
`.build()`) without an explicit `.with_weight_decay(...)` (or a
`cfg.weight_decay = ..` assignment) on the way, followed as BS004 follows
Adam's config (see `burnside explain BS004`). The finding sits on the
`::new()` and names where the config is initialised. An explicit
`.with_weight_decay(None)` is a decision, and is not reported.

burn 0.22.1's `MuonConfig` against `torch.optim.Muon`: momentum 0.95 with
Nesterov, the Newton–Schulz coefficients `(3.4445, -4.775, 2.0315)` and 5
steps, epsilon `1e-7` and the "original" learning-rate adjustment
`sqrt(max(1, A/B))` agree. burn's momentum buffer is PyTorch's divided by
`1 - momentum` (a sum where PyTorch keeps a moving average), which the
Newton–Schulz normalisation removes. PyTorch runs that iteration in
bfloat16 and burn in the gradient's own dtype: an arithmetic difference no
setting changes, so not a lint finding. Only weight decay differs.

Blind spots: those of BS004.

## Why is this bad?

burn's `MuonConfig` has no weight decay (`None`); `torch.optim.Muon(params)`
has `weight_decay=0.1`, applied as `param *= 1 - lr * 0.1` before each update
(burn applies a configured penalty the same way). A port relying on burn's
default never shrinks its weights, so they drift from the PyTorch run's by a
factor `(1 - lr * 0.1)` per step.

## Example

```rust
let mut optim = MuonConfig::new().with_ns_steps(5).init();
```

## Use instead

```rust
let mut optim = MuonConfig::new()
    .with_ns_steps(5)
    .with_weight_decay(Some(WeightDecayConfig::new(0.1)))
    .init();
```
"""

from __future__ import annotations

from burnside.lint.config_flow import default_left
from burnside.lint.finding import Severity
from burnside.lint.syntax import SourceUnit

ID = "BS010"
NAME = "muon-default-weight-decay"
SEVERITY = Severity.INFO
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (b"MuonConfig",)
TITLE = "Muon weight decay left at burn's default none (PyTorch uses 0.1)"


def check(unit: SourceUnit):
    yield from default_left(
        unit,
        frozenset({"MuonConfig"}),
        "with_weight_decay",
        "`{type}` weight decay left at burn's default none (PyTorch's Muon uses 0.1)",
        "set it explicitly to match PyTorch: `.with_weight_decay(Some(WeightDecayConfig::new(0.1)))`",
    )

"""## What it does

Flags an `AdamWConfig::new()` whose value becomes an optimizer (`.init()`,
`.init::<B, M>()`, `.build()`) without an explicit `.with_weight_decay(...)`
(or a `weight_decay` field assignment) on the way. The finding sits on the
`::new()` and names where the config is initialised.

The config is followed exactly as BS004 follows it (builder chains, `let`
bindings, struct fields and literals, `#[derive(Config)]` constructor
arguments, function parameters and return values, across the linted files of
one crate), with the same blind spots: configs loaded from a file, stored in
collections, `Option`s or trait objects, or passed through macros are not
followed, and fields are matched by name.

## Why is this bad?

burn's `AdamWConfig` defaults `weight_decay` to `1e-4`; PyTorch's
`torch.optim.AdamW` defaults it to `1e-2`, a hundred times more. A port that
keeps burn's default decays its weights far less than the original, which
shows up as a slowly growing gap in the loss and in the weight norms, with no
error anywhere.

## Example

```rust
let optim = AdamWConfig::new().with_epsilon(1e-8).init();
```

## Use instead

```rust
let optim = AdamWConfig::new().with_epsilon(1e-8).with_weight_decay(1e-2).init();
```
"""

from __future__ import annotations

from burnside.lint.config_flow import default_left
from burnside.lint.finding import Severity
from burnside.lint.syntax import SourceUnit

ID = "BS006"
NAME = "adamw-default-weight-decay"
SEVERITY = Severity.INFO
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (b"AdamWConfig",)
TITLE = "AdamW weight decay left at burn's default 1e-4 (PyTorch uses 1e-2)"


def check(unit: SourceUnit):
    yield from default_left(
        unit,
        frozenset({"AdamWConfig"}),
        "with_weight_decay",
        "`{type}` weight decay left at burn's default 1e-4 (PyTorch uses 1e-2)",
        "set it explicitly to match PyTorch: `.with_weight_decay(1e-2)`",
    )

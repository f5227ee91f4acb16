"""## What it does

Flags an `RmsPropConfig::new()` whose value becomes an optimizer (`.init()`,
`.build()`) with burn's default momentum or epsilon still in it: one finding
for a config that reaches the init without `.with_momentum(...)`, another for
one without `.with_epsilon(...)` (a `cfg.momentum = ..` / `cfg.epsilon = ..`
assignment counts as the setter). Both sit on the `::new()` and name where the
config is initialised.

The config is followed as BS004 follows Adam's (see `burnside explain BS004`
and `burnside.lint.config_flow`): along the builder chain, through `let`
bindings, `if`/`match` values, struct fields, `#[derive(Config)]` constructor
arguments, function parameters and return values, across the linted files of
the crate. In burn 0.22.1 RmsProp's momentum is a plain `f32` field of
`RmsPropConfig` (`.with_momentum(0.0)`), not SGD's nested `MomentumConfig`;
momentum 0 keeps no momentum buffer at all, as in PyTorch.

Blind spots: those of BS004 (a config loaded from a file, one stored in a
`Vec`, `Option`, trait object or macro, files of the crate not linted).

## Why is this bad?

`RmsPropConfig::new()` has momentum **0.9** and epsilon `1e-5`;
`torch.optim.RMSprop(params, lr)` has momentum 0 and eps `1e-8` (alpha 0.99,
centered false and weight decay 0 agree, and both add epsilon outside the
square root). A port written with burn's defaults trains with a momentum
buffer the original does not have: every step adds 0.9 times the previous
one, so steps grow up to tenfold and the loss curve parts from PyTorch's at
the second step. The larger epsilon damps updates of parameters whose mean
squared gradient is small.

## Example

```rust
let mut optim = RmsPropConfig::new().with_alpha(0.99).init();
```

## Use instead

```rust
let mut optim = RmsPropConfig::new().with_alpha(0.99).with_momentum(0.0).with_epsilon(1e-8).init();
```
"""

from __future__ import annotations

from burnside.lint.config_flow import default_left
from burnside.lint.finding import Severity
from burnside.lint.syntax import SourceUnit

ID = "BS008"
NAME = "rmsprop-default-momentum-epsilon"
SEVERITY = Severity.INFO
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (b"RmsPropConfig",)
TITLE = "RmsProp momentum and epsilon left at burn's defaults 0.9 and 1e-5 (PyTorch uses 0 and 1e-8)"

_TYPES = frozenset({"RmsPropConfig"})


def check(unit: SourceUnit):
    yield from default_left(
        unit,
        _TYPES,
        "with_momentum",
        "`{type}` momentum left at burn's default 0.9 (PyTorch's RMSprop uses 0)",
        "set it explicitly to match PyTorch: `.with_momentum(0.0)`",
    )
    yield from default_left(
        unit,
        _TYPES,
        "with_epsilon",
        "`{type}` epsilon left at burn's default 1e-5 (PyTorch's RMSprop uses 1e-8)",
        "set it explicitly to match PyTorch: `.with_epsilon(1e-8)`",
    )

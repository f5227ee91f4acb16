"""## What it does

Flags an `AdamConfig::new()` or `AdamWConfig::new()` builder chain that is
turned into an optimizer (`.init()`) without an explicit `.with_epsilon(...)`.
A chain bound with `let` is followed to its later `.init()`.

## Why is this bad?

burn's default Adam/AdamW epsilon is `1e-5`; PyTorch's is `1e-8`. A port that
relies on the default divides by a larger denominator, so updates for
parameters with small second moments differ from the PyTorch run and the loss
curves drift apart, with no error anywhere.

## Example

```rust
let mut optim = AdamConfig::new().with_beta_2(0.999).init();
```

## Use instead

```rust
let mut optim = AdamConfig::new().with_beta_2(0.999).with_epsilon(1e-8).init();
```
"""

from __future__ import annotations

from burnside.lint.config_chains import config_chains
from burnside.lint.finding import Hit, Severity
from burnside.lint.syntax import SourceUnit

ID = "BS004"
NAME = "adam-default-epsilon"
SEVERITY = Severity.INFO
TITLE = "Adam epsilon left at burn's default 1e-5 (PyTorch uses 1e-8)"

_TYPES = frozenset({"AdamConfig", "AdamWConfig"})


def check(unit: SourceUnit):
    for chain in config_chains(unit, _TYPES):
        if "with_epsilon" in chain.methods:
            continue
        if not ({"init", "build"} & set(chain.methods)):
            continue
        yield Hit(
            node=chain.new_call,
            message=f"`{chain.config_type}` epsilon left at burn's default 1e-5 (PyTorch uses 1e-8)",
            help="set it explicitly to match PyTorch: `.with_epsilon(1e-8)`",
        )

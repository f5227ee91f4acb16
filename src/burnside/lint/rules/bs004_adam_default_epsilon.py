"""## What it does

Flags an `AdamConfig::new()` or `AdamWConfig::new()` whose value becomes an
optimizer (`.init()`, `.init::<B, M>()`, `.build()`) without an explicit
`.with_epsilon(...)` (or an `epsilon` field assignment) on the way. The finding
sits on the `::new()` and names where the config is initialised.

The config is followed by name resolution on the syntax tree (see
`burnside.lint.config_flow`): along the builder chain, through `let` bindings
and their uses, through `if`/`match` values, into struct literals and fields
(`TrainingConfig { optimizer: cfg }`, `self.optimizer = cfg`,
`.with_optimizer(cfg)`), into constructor arguments of `#[derive(Config)]`
structs (`TrainingConfig::new(model, cfg)` → its required field at that
position), into a called function's parameter, and out of a function as its
return value to every call of that function; then to the `.init()` in
another function or another linted file of the same crate (the directory
holding the nearest `Cargo.toml`).

Blind spots: a config read back from a file (`TrainingConfig::load(..)`)
carries whatever epsilon was saved, so it is not a `::new()` and not checked;
a field is followed by name, so a struct field of the config's type that is
read through a different struct with a same-named field can be paired with
the wrong init; configs stored in collections, `Option`s, trait objects or
passed through macros are not followed; files of the crate that are not
part of the lint run are not searched.

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

from burnside.lint.config_flow import default_left
from burnside.lint.finding import Severity
from burnside.lint.syntax import SourceUnit

ID = "BS004"
NAME = "adam-default-epsilon"
SEVERITY = Severity.INFO
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (b"AdamConfig", b"AdamWConfig")
TITLE = "Adam epsilon left at burn's default 1e-5 (PyTorch uses 1e-8)"

_TYPES = frozenset({"AdamConfig", "AdamWConfig"})


def check(unit: SourceUnit):
    yield from default_left(
        unit,
        _TYPES,
        "with_epsilon",
        "`{type}` epsilon left at burn's default 1e-5 (PyTorch uses 1e-8)",
        "set it explicitly to match PyTorch: `.with_epsilon(1e-8)`",
    )

"""## What it does

Flags an `AdaGradConfig::new()` whose value becomes an optimizer (`.init()`,
`.build()`) without an explicit `.with_epsilon(...)` (or a `cfg.epsilon = ..`
assignment) on the way, followed as BS004 follows Adam's config (see
`burnside explain BS004`). The finding sits on the `::new()` and names where
the config is initialised.

burn 0.22.1's `AdaGradConfig` against `torch.optim.Adagrad`: `lr_decay` 0 and
no weight decay agree; burn has no `initial_accumulator_value`, and starts its
sum of squared gradients from zero, which is PyTorch's default 0; the learning
rate is given at each step in burn, so there is no default to differ. Only
epsilon differs.

Blind spots: those of BS004.

## Why is this bad?

burn's default AdaGrad epsilon is `1e-5`; PyTorch's is `1e-10`. Both divide
the gradient by `sqrt(sum of squared gradients) + epsilon`, so with burn's
default a parameter whose gradients are small (`sqrt(sum) ≈ 1e-4` or less,
common for embeddings of rare tokens) takes a visibly smaller step than in the
PyTorch run, with no error anywhere.

## Example

```rust
let mut optim = AdaGradConfig::new().with_lr_decay(0.0).init();
```

## Use instead

```rust
let mut optim = AdaGradConfig::new().with_lr_decay(0.0).with_epsilon(1e-10).init();
```
"""

from __future__ import annotations

from burnside.lint.config_flow import default_left
from burnside.lint.finding import Severity
from burnside.lint.syntax import SourceUnit

ID = "BS009"
NAME = "adagrad-default-epsilon"
SEVERITY = Severity.INFO
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (b"AdaGradConfig",)
TITLE = "AdaGrad epsilon left at burn's default 1e-5 (PyTorch uses 1e-10)"


def check(unit: SourceUnit):
    yield from default_left(
        unit,
        frozenset({"AdaGradConfig"}),
        "with_epsilon",
        "`{type}` epsilon left at burn's default 1e-5 (PyTorch's Adagrad uses 1e-10)",
        "set it explicitly to match PyTorch: `.with_epsilon(1e-10)`",
    )

"""## What it does

Flags SGD momentum configured without an explicit dampening: a
`MomentumConfig::new()` builder chain without `.with_dampening(...)`, or a
`MomentumConfig { .. }` struct literal that fills `dampening` from a base
(`..Default::default()`) instead of naming it.

The setters are collected along the builder chain and, when the chain is
bound with `let`, on every use of the binding (name resolution on the syntax
tree, shadowing respected; `m.dampening = 0.0;` counts). Unlike BS004, the
rule does not need to see the config initialised, and does not follow it into
other functions or files.

Blind spots: a momentum config built in a helper and dampened by its caller
is reported at the helper (a false positive the allow comment silences); one
passed through a struct field and dampened there is reported too.

## Why is this bad?

burn's `MomentumConfig` defaults to `dampening = 0.1`; PyTorch's `SGD` defaults
to `dampening = 0`. With the default, every gradient enters the momentum
buffer scaled by 0.9, so a port of `torch.optim.SGD(momentum=0.9)` takes
smaller steps than the original from the second step on.

## Example

```rust
let optim = SgdConfig::new()
    .with_momentum(Some(MomentumConfig::new().with_momentum(0.9)))
    .init();
```

## Use instead

```rust
let optim = SgdConfig::new()
    .with_momentum(Some(MomentumConfig::new().with_momentum(0.9).with_dampening(0.0)))
    .init();
```
"""

from __future__ import annotations

from burnside.lint.config_flow import local_configs
from burnside.lint.finding import Hit, Severity
from burnside.lint.syntax import SourceUnit, parent_of, text

ID = "BS005"
NAME = "sgd-default-dampening"
SEVERITY = Severity.INFO
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (b"MomentumConfig", b"with_momentum")
TITLE = "SGD momentum dampening left at burn's default 0.1 (PyTorch uses 0)"

_HELP = "set it explicitly to match PyTorch: `.with_dampening(0.0)`"


def check(unit: SourceUnit):
    for config in local_configs(unit, frozenset({"MomentumConfig"})):
        if "with_dampening" in config.methods:
            continue
        parent = parent_of(config.outermost)
        if parent is not None and parent.type == "base_field_initializer":
            # `MomentumConfig { .., ..MomentumConfig::new() }`: judged as a literal below.
            continue
        yield Hit(node=config.new_call, message=TITLE, help=_HELP)
    for literal in unit.nodes("momentum_struct"):
        body = literal.child_by_field_name("body")
        if body is None:
            continue
        fields = set()
        has_base = False
        for child in body.named_children:
            if child.type == "base_field_initializer":
                has_base = True
            elif child.type in ("field_initializer", "shorthand_field_initializer"):
                name = child.child_by_field_name("field") or (child.named_children[0] if child.named_children else None)
                if name is not None:
                    fields.add(text(name))
        if has_base and "dampening" not in fields:
            yield Hit(node=literal, message=TITLE, help="name the field: `dampening: 0.0`")

"""## What it does

Flags `GradientsParams::from_grads(grads, &module)` when `grads` comes from
`loss.backward()` and the loss was built, within the same function, by an
expression chain that never mentions `module`: not the module whose `forward`
produced the loss, not a clone of it, not one of its fields
(`&model.encoder`).

The rule follows `grads` back to `X.backward()`, `X` back to its `let`, and
every name in that expression back to its own `let` (a few levels deep). If
`module` (or what it was cloned from) appears anywhere in that chain, the call
is fine: that covers GAN-style code, where the generator's gradients flow
through the discriminator's `forward`. When the chain cannot be resolved (the
loss is a parameter, or comes from another function with no `forward` call in
sight, or only a loss function's `forward`, such as `mse.forward(output, y)`
with `output` a parameter), the rule says nothing.

## Why is this bad?

`from_grads` looks gradients up by the `ParamId`s of the module it is given.
A different module instance (built separately, e.g. a second `init`) has other
`ParamId`s, so the result is empty (`len() == 0`), and `optim.step` then
silently changes nothing.

## Example

```rust
let model = config.init(&device);
let other = config.init(&device);
let loss = ce.forward(model.forward(x), y);
let grads = GradientsParams::from_grads(loss.backward(), &other);
```

## Use instead

```rust
let loss = ce.forward(model.forward(x), y);
let grads = GradientsParams::from_grads(loss.backward(), &model);
```
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from burnside.lint.bindings import FunctionBindings, bindings_of
from burnside.lint.finding import Hit, Severity
from burnside.lint.step_sites import strip_wrappers
from burnside.lint.syntax import (
    SourceUnit,
    arguments_of,
    compact,
    enclosing_function,
    method_name,
    receiver_of,
    text,
)

if TYPE_CHECKING:
    from tree_sitter import Node

ID = "BS002"
NAME = "grads-from-other-module"
SEVERITY = Severity.WARNING
TITLE = "gradients are taken against a module that did not build the loss"

_MAX_DEPTH = 6
# Loss functions also have a `forward`; they are poor suggestions for the module.
_LOSS_FN_RE = re.compile(r"loss|criterion|^ce$|mse|\(", re.IGNORECASE)


def _likely_module(receivers: list[str]) -> list[str]:
    ordered = list(dict.fromkeys(receivers))
    modules = [r for r in ordered if not _LOSS_FN_RE.search(r)]
    return modules or ordered


def _unclone(node: Node) -> Node:
    node = strip_wrappers(node)
    while node.type == "call_expression" and method_name(node) == "clone" and not arguments_of(node):
        inner = receiver_of(node)
        if inner is None:
            break
        node = strip_wrappers(inner)
    return node


def _loss_expression(grads: Node, bindings: FunctionBindings) -> Node | None:
    """`X` in `grads ← X.backward()`, or None when that is not visible here."""
    grads = strip_wrappers(grads)
    if grads.type == "identifier":
        binding = bindings.latest(text(grads), grads.start_byte)
        if binding is None or binding.value is None:
            return None
        grads = strip_wrappers(binding.value)
    if grads.type == "call_expression" and method_name(grads) == "backward":
        return receiver_of(grads)
    return None


class _Chain:
    """Every name, field path and `forward` receiver in the expressions that built the loss."""

    def __init__(self, bindings: FunctionBindings) -> None:
        self.bindings = bindings
        self.paths: set[str] = set()
        self.forward_receivers: list[str] = []
        self._seen: set[tuple[str, int]] = set()

    def add(self, node: Node, depth: int = 0) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            kind = current.type
            if kind in ("identifier", "self"):
                name = text(current)
                self.paths.add(name)
                self._follow(name, current.start_byte, depth)
            elif kind == "field_expression":
                self.paths.add(compact(current))
            elif kind == "call_expression":
                name = method_name(current)
                receiver = receiver_of(current)
                if name is not None and name.startswith("forward") and receiver is not None:
                    self.forward_receivers.append(compact(_unclone(receiver)))
            stack.extend(current.named_children)

    def _follow(self, name: str, at: int, depth: int) -> None:
        if depth >= _MAX_DEPTH:
            return
        binding = self.bindings.latest(name, at)
        if binding is None or binding.value is None:
            return
        key = (name, binding.start_byte)
        if key in self._seen:
            return
        self._seen.add(key)
        self.add(binding.value, depth + 1)

    def mentions(self, module: str) -> bool:
        for path in self.paths:
            if path == module or path.startswith(module + "."):
                return True
            # `&model.encoder` when the loss came from `model.forward(...)`.
            if path != "self" and module.startswith(path + "."):
                return True
        return False


def _aliases(module: Node, bindings: FunctionBindings) -> list[str]:
    """The module's name plus what it was cloned or moved from (`let m = model.clone()`)."""
    names = [compact(module)]
    current = module
    for _ in range(_MAX_DEPTH):
        if current.type != "identifier":
            break
        binding = bindings.latest(text(current), current.start_byte)
        if binding is None or binding.value is None:
            break
        source = _unclone(binding.value)
        if source.type not in ("identifier", "field_expression"):
            break
        names.append(compact(source))
        current = source
    return names


def check(unit: SourceUnit):
    for call in unit.nodes("scoped_call"):
        function_node = call.child_by_field_name("function")
        name = function_node.child_by_field_name("name") if function_node is not None else None
        if name is None or text(name) != "from_grads":
            continue
        args = arguments_of(call)
        if len(args) != 2:
            continue
        function = enclosing_function(call)
        if function is None:
            continue
        bindings = bindings_of(function)
        loss = _loss_expression(args[0], bindings)
        if loss is None:
            continue
        chain = _Chain(bindings)
        chain.add(loss)
        # Only a loss function's forward in sight (`mse.forward(output, y)` with
        # `output` a parameter) means the module behind the loss is unknown.
        if not any(not _LOSS_FN_RE.search(r) for r in chain.forward_receivers):
            continue
        module = _unclone(args[1])
        if module.type not in ("identifier", "field_expression", "self"):
            continue
        if any(chain.mentions(alias) for alias in _aliases(module, bindings)):
            continue
        modules = _likely_module(chain.forward_receivers)
        builders = ", ".join(f"`{r}`" for r in modules)
        grads_text = " ".join(text(args[0]).split())
        yield Hit(
            node=args[1],
            message=f"gradients are taken against `{compact(module)}`, but the loss was built by {builders}",
            help=(
                f"pass the module whose forward built the loss, e.g. "
                f"`GradientsParams::from_grads({grads_text}, &{modules[-1]})`"
            ),
        )

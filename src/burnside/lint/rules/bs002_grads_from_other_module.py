"""## What it does

Flags `GradientsParams::from_grads(grads, &module)` in two cases:

1. `grads` comes from `loss.backward()` and the loss was built, within the
   same function, by an expression chain that never mentions `module`: not
   the module whose `forward` produced the loss, not a clone of it, not one
   of its fields (`&model.encoder`). A `.detach()` cuts the chain: what only
   reaches the loss through a detached tensor did not build it.
2. The gradients are then passed to `optim.step(lr, other, grads)` where
   `other` is a different module (not `module`, not a clone or alias of it,
   not a field of it or the module it is a field of), even when both appear
   in the loss. Both must be field paths or names bound by `let` or a `fn`
   parameter: a closure parameter (`Some(model).map(|m| ..)`) or a pattern
   binding could be either, so it is left alone.

The rule follows `grads` back to `X.backward()`, `X` back to its `let`, and
every name in that expression back to its own `let` (a few levels deep). If
`module` (or what it was cloned from) appears anywhere in that chain, the call
is fine: that covers GAN-style code, where the generator's gradients flow
through the discriminator's `forward`. When the chain cannot be resolved (the
loss is a parameter, or comes from another function with no `forward` call in
sight, or only a loss function's `forward`, such as `mse.forward(output, y)`
with `output` a parameter), the rule says nothing.

Blind spots: names are compared as text after following `let` aliases and
`.clone()` in the same function, so two names for one module reached any
other way (a `&mut` re-borrow through a helper, a module moved into a struct
and read back) look like different modules only if they also fail every
alias check, and are then not reported; gradients built in one function and
stepped in another are not paired; loss chains deeper than six `let`s are cut
off.

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
from burnside.lint.step_sites import step_sites, strip_wrappers
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
                if name == "detach":
                    # No gradient flows back through a detached tensor.
                    continue
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
        for receiver in self.forward_receivers:
            # `self.forward(x)` may run `self.policy_model`: a part of a forward's receiver built the loss too.
            if module.startswith(receiver + "."):
                return True
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


def _related(a: list[str], b: list[str]) -> bool:
    """Whether two alias lists can name the same module or one contains the other."""
    for x in a:
        for y in b:
            if x == y or x.startswith(y + ".") or y.startswith(x + "."):
                return True
    return False


def _resolved(module: Node, bindings: FunctionBindings) -> bool:
    """A field path, or a name bound by `let` or a fn parameter (not a closure or pattern binding)."""
    if module.type in ("field_expression", "self"):
        return True
    return module.type == "identifier" and bindings.latest(text(module), module.start_byte) is not None


def _from_grads_call(node: Node) -> Node | None:
    node = strip_wrappers(node)
    if node.type != "call_expression":
        return None
    function = node.child_by_field_name("function")
    if function is None or function.type != "scoped_identifier":
        return None
    name = function.child_by_field_name("name")
    return node if name is not None and text(name) == "from_grads" else None


def _stepped_other_module(unit: SourceUnit):
    """`from_grads(g, &a)` whose result is passed to `optim.step(lr, b, ..)` with `b` not `a`."""
    for site in step_sites(unit):
        if site.function is None:
            continue
        bindings = bindings_of(site.function)
        grads_arg = strip_wrappers(arguments_of(site.call)[2])
        call = _from_grads_call(grads_arg)
        if call is None and grads_arg.type == "identifier":
            binding = bindings.latest(text(grads_arg), grads_arg.start_byte)
            if binding is not None and binding.value is not None:
                call = _from_grads_call(binding.value)
        if call is None:
            continue
        args = arguments_of(call)
        if len(args) != 2:
            continue
        keyed = _unclone(args[1])
        stepped = _unclone(site.module_arg)
        if not (_resolved(keyed, bindings) and _resolved(stepped, bindings)):
            continue
        if _related(_aliases(keyed, bindings), _aliases(stepped, bindings)):
            continue
        line = site.call.start_point.row + 1
        yield Hit(
            node=args[1],
            message=(
                f"gradients are taken against `{compact(keyed)}`, but `{compact(stepped)}` is stepped "
                f"with them at line {line}"
            ),
            help=f"key the gradients to the module being stepped: `GradientsParams::from_grads(.., &{compact(stepped)})`",
        )


def check(unit: SourceUnit):
    reported: set[int] = set()
    for hit in _stepped_other_module(unit):
        reported.add(hit.node.start_byte)
        yield hit
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
        if args[1].start_byte in reported:
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

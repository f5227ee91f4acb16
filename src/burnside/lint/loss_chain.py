"""What a loss was built from, and where a step's gradients came from, followed back through `let`s.

BS002 asks two questions of one function, both answered by walking backwards
from a use to its `let` (`burnside.lint.bindings`, the latest `let NAME` before
the use wins):

* `loss_chain(grads)`: from `grads` to `X.backward()` (inline or through its
  `let`), from `X` to its `let`, and from every name in that expression to its
  own `let`, up to `MAX_DEPTH` levels: every name, field path and `forward`
  receiver that built the loss. A `.detach()` cuts the chain.
* `from_grads_sources(grads)`: the `GradientsParams::from_grads(..)` calls the
  gradients passed to a step come from, through the `let`s and expressions in
  between (`let grads = if clip { clip_global(&model, grads, 1.0) } else { grads };`).

`module_aliases` names a module the ways the function spells it: the name
itself plus what it was cloned or moved from (`let m = model.clone()`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnside.lint.bindings import FunctionBindings
from burnside.lint.step_sites import strip_wrappers
from burnside.lint.syntax import arguments_of, compact, method_name, receiver_of, text

if TYPE_CHECKING:
    from tree_sitter import Node

# How many `let`s back a chain (or a module's aliases, or a step's gradients) is followed.
MAX_DEPTH = 6


def unclone(node: Node) -> Node:
    """`node` without `&`, `*`, parentheses and trailing `.clone()` calls."""
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


class LossChain:
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
                    self.forward_receivers.append(compact(unclone(receiver)))
            stack.extend(current.named_children)

    def _follow(self, name: str, at: int, depth: int) -> None:
        if depth >= MAX_DEPTH:
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


def loss_chain(grads: Node, bindings: FunctionBindings) -> LossChain | None:
    """The chain that built the loss `grads` came from, or None when `grads ← X.backward()` is not in sight."""
    loss = _loss_expression(grads, bindings)
    if loss is None:
        return None
    chain = LossChain(bindings)
    chain.add(loss)
    return chain


def module_aliases(module: Node, bindings: FunctionBindings) -> list[str]:
    """The module's name plus what it was cloned or moved from (`let m = model.clone()`)."""
    names = [compact(module)]
    current = module
    for _ in range(MAX_DEPTH):
        if current.type != "identifier":
            break
        binding = bindings.latest(text(current), current.start_byte)
        if binding is None or binding.value is None:
            break
        source = unclone(binding.value)
        if source.type not in ("identifier", "field_expression"):
            break
        names.append(compact(source))
        current = source
    return names


def _from_grads_call(node: Node) -> Node | None:
    node = strip_wrappers(node)
    if node.type != "call_expression":
        return None
    function = node.child_by_field_name("function")
    if function is None or function.type != "scoped_identifier":
        return None
    name = function.child_by_field_name("name")
    return node if name is not None and text(name) == "from_grads" else None


def from_grads_sources(grads: Node, bindings: FunctionBindings) -> list[Node]:
    """The `from_grads` calls the stepped gradients come from, followed through `let`s and the
    expressions between (`let grads = if clip { clip_global(&model, grads, 1.0) } else { grads };`)."""
    found: dict[int, Node] = {}
    seen: set[int] = set()
    stack = [(grads, 0)]
    while stack:
        node, depth = stack.pop()
        node = strip_wrappers(node)
        call = _from_grads_call(node)
        if call is not None:
            found[call.start_byte] = call
            continue
        if node.type == "identifier":
            binding = bindings.latest(text(node), node.start_byte)
            if (binding is not None and binding.value is not None and binding.start_byte not in seen
                    and depth < MAX_DEPTH):
                seen.add(binding.start_byte)
                stack.append((binding.value, depth + 1))
            continue
        if node.type == "closure_expression":
            continue
        stack.extend((child, depth) for child in node.named_children)
    return list(found.values())

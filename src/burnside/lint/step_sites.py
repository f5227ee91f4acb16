"""Module-optimizer `step` call sites and what happens to their result.

A call `RECV.step(a, b, c)` counts as a module step (burn's
`optim.step(lr, module, grads) -> module`) when it has exactly three arguments
and the third one is gradients. The third argument is gradients when, after
stripping `&`, `*` and parentheses, it is

* a name that reads as gradients: `grads`, `grad`, `gradients`, `*_grads`,
  `grads_*` (any case), or a field ending in such a name (`self.grads`);
* a name bound in the same function by `let` from an expression mentioning
  `GradientsParams`, `from_grads`, `from_module`, `.grads()` or a `*_grads(..)`
  call, or typed `GradientsParams` (binding type or parameter type);
* a call to one of those (`GradientsParams::from_grads(...)`,
  `accumulator.grads()`, `make_grads(...)`), or any call or method call that
  takes gradients as an argument or receiver (`to_params(grads)`,
  `grads.clone()`).

Turbofish calls (`optim.step::<M>(...)`) count like plain ones.

Everything else is left alone: scheduler `step()`, environment `step(action)`,
four-argument tensor-level `step(lr, tensor, grad, state)`, and three-argument
steps whose last argument is a closure or anything else (L-BFGS
`step(lr, module, &mut closure)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnside.lint.bindings import bindings_of, uses_of
from burnside.lint.suppression import in_test_code, is_test_function
from burnside.lint.syntax import (
    LOOP_KINDS,
    SourceUnit,
    arguments_of,
    block_tail,
    callee,
    compact,
    enclosing_function,
    method_name,
    parent_of,
    receiver_of,
    text,
)

if TYPE_CHECKING:
    from tree_sitter import Node

_GRADS_NAME_RE = re.compile(r"^(grads?|gradients?|\w*_grads?|grads?_\w*)$", re.IGNORECASE)
_GRADS_SOURCE_RE = re.compile(r"GradientsParams|from_grads|from_module|\bgrads\s*\(|_grads\s*\(", re.IGNORECASE)
# Reading optimizer state right after a discarded step is how optimizer unit tests
# populate state on purpose; in test code that makes the discard deliberate.
_STATE_READ_TEMPLATE = r"\b{receiver}\s*\.\s*(to_record|into_record|into_bytes|save|load_record)\b"

_WRAPPERS = frozenset({"reference_expression", "unary_expression", "parenthesized_expression"})


def strip_wrappers(node: Node) -> Node:
    """`&x`, `&*x`, `*x`, `(x)` → `x`."""
    while node.type in _WRAPPERS:
        inner = [c for c in node.named_children if c.type not in ("mutable_specifier",)]
        if not inner:
            break
        node = inner[-1]
    return node


@dataclass
class StepSite:
    call: Node
    receiver: str
    function: Node | None
    module_arg: Node
    discard: str | None
    in_loop: bool
    deliberate: bool

    @property
    def discarded(self) -> bool:
        return self.discard is not None and not self.deliberate


# Combinators whose closure's return value becomes (part of) their own result:
# `Some(m).map(|m| optim.step(..))` yields the stepped module only if the result is kept.
_COMBINATORS = frozenset({
    "map", "and_then", "map_or", "map_or_else", "unwrap_or_else", "or_else", "then", "then_some",
    "filter_map", "flat_map", "fold", "map_err",
})


def _is_gradients(arg: Node, function: Node | None, depth: int = 0) -> bool:
    arg = strip_wrappers(arg)
    if arg.type == "identifier":
        name = text(arg)
        if _GRADS_NAME_RE.match(name):
            return True
        if function is None:
            return False
        binding = bindings_of(function).latest(name, arg.start_byte)
        if binding is None:
            return False
        if "GradientsParams" in binding.type_text:
            return True
        return binding.value is not None and bool(_GRADS_SOURCE_RE.search(text(binding.value)))
    if arg.type == "field_expression":
        field = arg.child_by_field_name("field")
        return field is not None and bool(_GRADS_NAME_RE.match(text(field)))
    if arg.type == "call_expression":
        function_node = callee(arg)
        if function_node is not None and _GRADS_SOURCE_RE.search(text(function_node) + "("):
            return True
        if depth >= 3:
            return False
        # Gradients passed through a helper: `to_params(grads)`, `grads.clone()`.
        inputs = arguments_of(arg)
        receiver = receiver_of(arg)
        if receiver is not None:
            inputs.append(receiver)
        return any(_is_gradients(i, function, depth + 1) for i in inputs)
    return False


def _read_after(decl: Node, name: str) -> bool:
    return bool(uses_of(decl, name))


def _closure_result(closure: Node) -> Node | None:
    """The combinator call whose result carries the closure's return value, if any."""
    args = parent_of(closure)
    if args is None or args.type != "arguments":
        return None
    call = parent_of(args)
    if call is None or call.type != "call_expression" or method_name(call) not in _COMBINATORS:
        return None
    return call


def _value_node(call: Node) -> Node:
    """The outermost node carrying the call's value: through parentheses and block tails."""
    node = call
    while parent_of(node) is not None:
        parent = parent_of(node)
        if parent.type == "parenthesized_expression":
            node = parent
            continue
        if parent.type == "block" and block_tail(parent) == node:
            if parent_of(parent) is not None and parent_of(parent).type == "closure_expression":
                node = parent
                continue
        break
    return node


def _discard_kind(call: Node, depth: int = 0) -> str | None:
    """How the step's result is dropped, or None when it flows somewhere."""
    node = _value_node(call)
    parent = parent_of(node)
    if parent is None:
        return None
    if parent.type == "closure_expression" and depth < 8:
        # The step is what the closure returns; judge the combinator's result instead.
        outer = _closure_result(parent)
        if outer is None:
            return None
        kind = _discard_kind(outer, depth + 1)
        return f"{kind}, through `.{method_name(outer)}(..)`" if kind is not None else None
    if parent.type == "expression_statement":
        return "expression statement"
    if parent.type == "let_declaration":
        pattern = parent.child_by_field_name("pattern")
        if pattern is None:
            return None
        name = text(pattern)
        if name == "_":
            return "`let _ =`"
        if pattern.type == "identifier":
            if name.startswith("_"):
                return f"`let {name} =`"
            if not _read_after(parent, name):
                return f"binding `{name}` never read"
        return None
    if parent.type == "assignment_expression":
        left = parent.child_by_field_name("left")
        if left is not None and text(left).strip() == "_":
            return "`_ =`"
    return None


def _in_loop(call: Node, function: Node | None) -> bool:
    current = parent_of(call)
    stop = function.start_byte if function is not None else -1
    while current is not None and current.start_byte > stop:
        if current.type in LOOP_KINDS:
            return True
        current = parent_of(current)
    return False


def _is_last_statement(call: Node, function: Node) -> bool:
    body = function.child_by_field_name("body")
    if body is None:
        return False
    statements = [c for c in body.named_children if c.type not in ("line_comment", "block_comment")]
    if not statements:
        return False
    last = statements[-1]
    node = call
    while node is not None and node.start_byte >= last.start_byte and node.end_byte <= last.end_byte:
        if node.start_byte == last.start_byte and node.end_byte == last.end_byte and node.type == last.type:
            return True
        if node.type not in ("parenthesized_expression", "call_expression", "let_declaration",
                             "expression_statement", "assignment_expression"):
            return False
        node = parent_of(node)
    return False


def _deliberate(call: Node, receiver: str, function: Node | None) -> bool:
    """Test code that steps only to fill optimizer state, or to show the step does not panic."""
    if function is None or not in_test_code(call):
        return False
    if is_test_function(function) and _is_last_statement(call, function):
        # Nothing after it could check the module: a "does not panic" test.
        return True
    after = function.text[call.end_byte - function.start_byte :].decode("utf-8", "replace")
    last = receiver.rsplit(".", 1)[-1]
    return re.search(_STATE_READ_TEMPLATE.format(receiver=re.escape(last)), after) is not None


def step_sites(unit: SourceUnit) -> list[StepSite]:
    """Module-optimizer step calls in source order (computed once per file)."""
    cached = unit.memo.get("step_sites")
    if cached is not None:
        return cached
    sites = []
    for call in unit.nodes("step_call"):
        args = arguments_of(call)
        if len(args) != 3:
            continue
        function = enclosing_function(call)
        if not _is_gradients(args[2], function):
            continue
        receiver_node = receiver_of(call)
        receiver = compact(receiver_node) if receiver_node is not None else ""
        discard = _discard_kind(call)
        sites.append(
            StepSite(
                call=call,
                receiver=receiver,
                function=function,
                module_arg=args[1],
                discard=discard,
                in_loop=_in_loop(call, function),
                deliberate=discard is not None and _deliberate(call, receiver, function),
            )
        )
    unit.memo["step_sites"] = sites
    return sites

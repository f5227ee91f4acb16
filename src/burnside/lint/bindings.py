"""Local `let` bindings and parameters of a function, looked up by name and position.

Rules use this to follow a name back to the expression it was bound from
(`grads` ← `GradientsParams::from_grads(...)`, `loss` ← `model.forward(...)`),
and forward to where a bound value is used (`uses_of`). Backwards it is a
lexical approximation: the latest `let NAME` before a position wins, whatever
block it sits in. Forwards it resolves names on the syntax tree: the uses of a
`let` are the identifiers of that name in its block after it, minus those
shadowed by a later `let` of the same name in an enclosing block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnside.lint.syntax import parent_of, query_cursor, text

if TYPE_CHECKING:
    from tree_sitter import Node

_LET_QUERY = """
(let_declaration pattern: (identifier) @name) @let
(parameter pattern: (identifier) @param_name) @param
"""

_IDENTIFIER_QUERY = "(identifier) @id"



@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    start_byte: int
    end_byte: int
    value: Node | None
    type_text: str
    is_parameter: bool


class FunctionBindings:
    """All bindings of one function, in source order."""

    def __init__(self, function: Node) -> None:
        self.function = function
        found: list[Binding] = []
        for _, match in query_cursor(_LET_QUERY).matches(function):
            if "let" in match:
                decl = match["let"][0]
                type_node = decl.child_by_field_name("type")
                found.append(
                    Binding(
                        name=text(match["name"][0]),
                        start_byte=decl.start_byte,
                        end_byte=decl.end_byte,
                        value=decl.child_by_field_name("value"),
                        type_text=text(type_node) if type_node is not None else "",
                        is_parameter=False,
                    )
                )
            elif "param" in match:
                param = match["param"][0]
                type_node = param.child_by_field_name("type")
                found.append(
                    Binding(
                        name=text(match["param_name"][0]),
                        start_byte=param.start_byte,
                        end_byte=param.end_byte,
                        value=None,
                        type_text=text(type_node) if type_node is not None else "",
                        is_parameter=True,
                    )
                )
        found.sort(key=lambda b: b.start_byte)
        self.bindings = found

    def latest(self, name: str, before_byte: int) -> Binding | None:
        """The binding of `name` visible at `before_byte` (ignoring block scoping)."""
        result = None
        for binding in self.bindings:
            if binding.start_byte >= before_byte:
                break
            if binding.name == name and binding.end_byte <= before_byte:
                result = binding
        return result


_per_function: dict[int, FunctionBindings] = {}


def bindings_of(function: Node) -> FunctionBindings:
    # Node ids are only unique while the tree lives; the cache is cleared per file.
    key = function.id
    cached = _per_function.get(key)
    if cached is None or cached.function.start_byte != function.start_byte:
        cached = FunctionBindings(function)
        _per_function[key] = cached
    return cached


def forget_trees() -> None:
    from burnside.lint.syntax import forget_parents

    _per_function.clear()
    forget_parents()


def _identifiers_in(scope: Node, start_byte: int, name: str) -> list[Node]:
    """Identifier nodes spelled `name` in `scope` from `start_byte` on, in source order."""
    cursor = query_cursor(_IDENTIFIER_QUERY)
    cursor.set_byte_range(start_byte, scope.end_byte)
    try:
        found = cursor.captures(scope).get("id", [])
    finally:
        cursor.set_byte_range(0, 0xFFFFFFFF)
    wanted = name.encode()
    hits = [n for n in found if n.start_byte >= start_byte and n.text == wanted]
    hits.sort(key=lambda n: n.start_byte)
    return hits


def uses_of(binder: Node, name: str) -> list[Node]:
    """Where the value bound by `binder` (a `let_declaration` or a `parameter`) is read.

    Identifiers inside macro token trees count as uses: callers that need an
    expression check the node's parent.
    """
    if binder.type == "parameter":
        function = parent_of(parent_of(binder)) if parent_of(binder) is not None else None
        scope = function.child_by_field_name("body") if function is not None else None
        start = scope.start_byte if scope is not None else 0
    else:
        scope = parent_of(binder)
        start = binder.end_byte
    if scope is None:
        return []
    candidates = _identifiers_in(scope, start, name)
    shadows = []
    for node in candidates:
        parent = parent_of(node)
        if parent is not None and parent.type == "let_declaration" and parent.child_by_field_name("pattern") == node:
            shadows.append(parent)
    uses = []
    for node in candidates:
        parent = parent_of(node)
        if parent is not None and parent.type == "let_declaration" and parent.child_by_field_name("pattern") == node:
            continue
        if any(_shadowed_by(let, node) for let in shadows):
            continue
        uses.append(node)
    return uses


def _shadowed_by(let: Node, use: Node) -> bool:
    block = parent_of(let)
    return let.end_byte <= use.start_byte and block is not None and block.start_byte <= use.start_byte < block.end_byte

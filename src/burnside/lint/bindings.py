"""Local `let` bindings and parameters of a function, looked up by name and position.

Rules use this to follow a name back to the expression it was bound from
(`grads` ← `GradientsParams::from_grads(...)`, `loss` ← `model.forward(...)`).
It is a lexical approximation: the latest `let NAME` before a position wins,
whatever block it sits in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnside.lint.syntax import text

if TYPE_CHECKING:
    from tree_sitter import Node

LET_QUERY = """
(let_declaration pattern: (identifier) @name) @let
(parameter pattern: (identifier) @param_name) @param
"""

_cache: dict[str, object] = {}


def _cursor():
    if "cursor" not in _cache:
        from tree_sitter import Query, QueryCursor

        from burnside.lint.syntax import _language

        _cache["cursor"] = QueryCursor(Query(_language(), LET_QUERY))
    return _cache["cursor"]


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
        for _, match in _cursor().matches(function):
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
    _per_function.clear()

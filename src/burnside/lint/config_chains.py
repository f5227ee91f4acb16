"""Builder chains on `MomentumConfig`: which `with_*` setters a `MomentumConfig::new()` gets.

BS005 asks whether `.with_dampening(..)` is ever called on a momentum config,
along its builder chain (turbofish arguments skipped) and, when the chain is
bound with `let`, on every use of that binding found by name resolution on
the syntax tree (`burnside.lint.bindings.uses_of`, shadowing respected). A
`cfg.dampening = 0.0;` assignment counts as the setter. The Adam rules, which
also follow a config into other functions and files, use `config_flow`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnside.lint.bindings import uses_of
from burnside.lint.syntax import (
    SourceUnit,
    method_call_on,
    method_name,
    parent_of,
    text,
)

if TYPE_CHECKING:
    from tree_sitter import Node


@dataclass
class ConfigChain:
    config_type: str
    new_call: Node
    outermost: Node
    methods: list[str]


def _chain(start: Node) -> tuple[Node, list[str]]:
    """The outermost call of the method chain on `start`, and the methods called along it."""
    methods: list[str] = []
    outer = start
    while True:
        call = method_call_on(outer)
        if call is None:
            return outer, methods
        methods.append(method_name(call) or "")
        outer = call


def _methods_through_binding(outer: Node) -> list[str]:
    """Methods called on, and fields assigned to, `cfg` after `let cfg = <chain>;`."""
    parent = parent_of(outer)
    if parent is None or parent.type != "let_declaration" or parent.child_by_field_name("value") != outer:
        return []
    pattern = parent.child_by_field_name("pattern")
    if pattern is None or pattern.type != "identifier":
        return []
    methods: list[str] = []
    for use in uses_of(parent, text(pattern)):
        _, along = _chain(use)
        methods.extend(along)
        field = parent_of(use)
        if field is not None and field.type == "field_expression" and field.child_by_field_name("value") == use:
            assignment = parent_of(field)
            name = field.child_by_field_name("field")
            if assignment is not None and assignment.type == "assignment_expression" and name is not None:
                if assignment.child_by_field_name("left") == field:
                    methods.append(f"with_{text(name)}")
    return methods


def config_chains(unit: SourceUnit, types: frozenset[str]) -> list[ConfigChain]:
    chains = []
    for call in unit.nodes("scoped_call"):
        function = call.child_by_field_name("function")
        if function is None:
            continue
        name = function.child_by_field_name("name")
        path = function.child_by_field_name("path")
        if name is None or path is None or text(name) != "new":
            continue
        type_name = text(path).rsplit("::", 1)[-1].strip()
        if type_name not in types:
            continue
        outer, methods = _chain(call)
        methods.extend(_methods_through_binding(outer))
        chains.append(ConfigChain(type_name, call, outer, methods))
    return chains

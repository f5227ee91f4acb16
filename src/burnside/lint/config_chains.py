"""Builder chains on burn config types: `AdamConfig::new().with_x(..).init()`.

BS004 and BS005 both ask which `with_*` setters and which terminal methods a
`XConfig::new()` call is followed by, including through one `let` binding
(`let cfg = AdamConfig::new(); ... cfg.init()`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnside.lint.syntax import SourceUnit, enclosing_function, text, parent_of

if TYPE_CHECKING:
    from tree_sitter import Node


@dataclass
class ConfigChain:
    config_type: str
    new_call: Node
    outermost: Node
    methods: list[str]


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
        methods: list[str] = []
        outer = call
        while True:
            parent = parent_of(outer)
            if parent is None or parent.type != "field_expression":
                break
            grand = parent_of(parent)
            field = parent.child_by_field_name("field")
            if grand is None or grand.type != "call_expression" or field is None:
                break
            methods.append(text(field))
            outer = grand
        methods.extend(_methods_through_binding(outer))
        chains.append(ConfigChain(type_name, call, outer, methods))
    return chains


def _methods_through_binding(outer: Node) -> list[str]:
    """Methods later called on `cfg` when the chain ends in `let cfg = ...;`."""
    parent = parent_of(outer)
    if parent is None or parent.type != "let_declaration":
        return []
    pattern = parent.child_by_field_name("pattern")
    function = enclosing_function(outer)
    if pattern is None or pattern.type != "identifier" or function is None:
        return []
    name = re.escape(text(pattern))
    after = function.text[parent.end_byte - function.start_byte :].decode("utf-8", "replace")
    methods: list[str] = []
    for statement in re.findall(rf"\b{name}\b[^;]*", after):
        methods.extend(re.findall(r"\.\s*(\w+)\s*\(", statement))
    return methods

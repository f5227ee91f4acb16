"""Where a file makes a module take no gradients: `.no_grad()` / `.set_require_grad(false)`.

BS002 asks whether the module gradients are keyed to is frozen, as far as the
file shows it (`frozen_at`):

* `let m = <expr>.no_grad()` for the name passed;
* for a place such as `model.target`, an assignment `model.target = <expr>.no_grad()`
  in the same function, or `self.target = ...` in any method when the place is
  `self.target`;
* a struct literal `Agent { target: <expr>.no_grad(), .. }` of a struct declared
  in the same file whose `target` field is not a tensor (a `Batch { target: y.no_grad() }`
  freezes data, not a module). What builds the struct freezes that field for
  every instance, whatever variable holds it.

A file that also sets the field back with `set_require_grad(true)` anywhere
shows no freeze for that field: which state the module is in at the
`from_grads` then depends on the order of calls, which is not followed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnside.lint.bindings import FunctionBindings
from burnside.lint.step_sites import strip_wrappers
from burnside.lint.syntax import (
    SourceUnit,
    arguments_of,
    compact,
    enclosing,
    enclosing_function,
    method_name,
    parent_of,
    text,
)

if TYPE_CHECKING:
    from tree_sitter import Node

_FREEZE_CALLS = frozenset({"no_grad", "set_require_grad"})


def _freeze_call(value: Node | None) -> str | None:
    """`.no_grad()` or `.set_require_grad(false)` when `value` ends in one of them."""
    if value is None:
        return None
    value = strip_wrappers(value)
    if value.type != "call_expression":
        return None
    name = method_name(value)
    if name not in _FREEZE_CALLS:
        return None
    args = arguments_of(value)
    if name == "no_grad" and not args:
        return ".no_grad()"
    if name == "set_require_grad" and len(args) == 1 and text(args[0]) == "false":
        return ".set_require_grad(false)"
    return None


@dataclass(frozen=True, slots=True)
class _Freeze:
    line: int
    call: str
    # The assigned place (`model.target`, `self.agent.target`), or "" for a struct literal's field.
    place: str
    function: int  # start byte of the enclosing fn, -1 outside any


def _declared_module_field(unit: SourceUnit, initializer: Node, field: str) -> bool:
    """Whether the struct literal around `initializer` is of a struct declared in this file whose
    `field` is not a tensor: `.no_grad()` on a tensor field (`Batch { target: y.no_grad() }`)
    says nothing about a module."""
    literal = parent_of(parent_of(initializer)) if parent_of(initializer) is not None else None
    if literal is None or literal.type != "struct_expression":
        return False
    name_node = literal.child_by_field_name("name")
    name = text(name_node) if name_node is not None else ""
    if name == "Self":
        impl = enclosing(literal, frozenset({"impl_item"}))
        type_node = impl.child_by_field_name("type") if impl is not None else None
        name = text(type_node).split("<", 1)[0] if type_node is not None else ""
    if not name.isidentifier():
        return False
    root = unit.tree.root_node
    for match in re.finditer(rb"\bstruct\s+" + re.escape(name.encode()) + rb"\b", unit.source):
        item = root.descendant_for_byte_range(match.start(), match.start() + 6)
        item = parent_of(item) if item is not None else None
        if item is None or item.type != "struct_item":
            continue
        body = item.child_by_field_name("body")
        for declaration in body.named_children if body is not None else []:
            declared = declaration.child_by_field_name("name")
            type_node = declaration.child_by_field_name("type")
            if declared is not None and text(declared) == field and type_node is not None:
                return "Tensor" not in text(type_node)
    return False


def _field_freezes(unit: SourceUnit, field: str) -> list[_Freeze]:
    """Every `X.field = ...no_grad()` and `Struct { field: ...no_grad() }` in the file (once per file and field).

    Empty when the file also sets that field back to `set_require_grad(true)` anywhere.
    """
    memo = unit.memo.setdefault("field_freezes", {})
    if field in memo:
        return memo[field]
    found: list[_Freeze] = []
    pattern = re.compile(rb"\b" + re.escape(field.encode()) + rb"\s*(?::|=(?!=))")
    root = unit.tree.root_node
    for match in pattern.finditer(unit.source):
        name = root.descendant_for_byte_range(match.start(), match.start() + len(field))
        if name is None or name.type not in ("field_identifier", "identifier"):
            continue
        holder = parent_of(name)
        value, place = None, ""
        if holder is not None and holder.type == "field_initializer" and holder.child_by_field_name("field") == name:
            if _declared_module_field(unit, holder, field):
                value = holder.child_by_field_name("value")
        elif holder is not None and holder.type == "field_expression" and holder.child_by_field_name("field") == name:
            assignment = parent_of(holder)
            if (assignment is not None and assignment.type == "assignment_expression"
                    and assignment.child_by_field_name("left") == holder):
                value, place = assignment.child_by_field_name("right"), compact(holder)
        if value is None:
            continue
        if re.search(r"set_require_grad\s*\(\s*true", text(value)):
            found = []
            break
        call = _freeze_call(value)
        if call is not None:
            function = enclosing_function(value)
            found.append(_Freeze(unit.line(value), call, place, function.start_byte if function is not None else -1))
    memo[field] = found
    return found


def frozen_at(unit: SourceUnit, module: Node, aliases: list[str], bindings: FunctionBindings) -> tuple[int, str] | None:
    """(line, call) where `module` (spelled `aliases` in its function) was made to take no gradients, if this file
    shows it.

    A `let` of the module's name, an assignment to its place in the same function or (for a
    `self.` place) in any method, or the field's value in a struct literal. An assignment to a
    local's field in another function is another variable, and does not count.
    """
    if module.type == "identifier":
        binding = bindings.latest(text(module), module.start_byte)
        if binding is not None:
            call = _freeze_call(binding.value)
            if call is not None:
                return unit.line(binding.value), call
    here = bindings.function.start_byte
    for alias in aliases:
        if "." not in alias:
            continue
        for freeze in _field_freezes(unit, alias.rsplit(".", 1)[1]):
            if not freeze.place or (freeze.place == alias and (alias.startswith("self.") or freeze.function == here)):
                return freeze.line, freeze.call
    return None

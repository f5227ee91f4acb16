"""Parsed Rust source: the tree-sitter language, the candidate-node query, and `SourceUnit`.

Everything that needs tree-sitter is created lazily and once per process, so that
`import burnside.lint` stays cheap and worker processes build their own parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Tree

# Candidate nodes are found by one query run in C; rules never walk the whole tree
# in Python. Code inside comments, string literals and macro token trees never
# becomes a call_expression in tree-sitter-rust, so those are excluded for free.
CANDIDATE_QUERY = """
(call_expression
  function: (field_expression field: (field_identifier) @_step (#eq? @_step "step"))) @step_call
(call_expression
  function: (generic_function
    function: (field_expression field: (field_identifier) @_gstep (#eq? @_gstep "step")))) @step_call
(call_expression
  function: (scoped_identifier name: (identifier) @_fn (#any-of? @_fn "from_grads" "new"))) @scoped_call
(struct_expression name: (type_identifier) @_s (#eq? @_s "MomentumConfig")) @momentum_struct
"""

_state: dict[str, object] = {}


def _language():
    if "language" not in _state:
        import tree_sitter_rust
        from tree_sitter import Language

        _state["language"] = Language(tree_sitter_rust.language())
    return _state["language"]


def parser():
    if "parser" not in _state:
        from tree_sitter import Parser

        _state["parser"] = Parser(_language())
    return _state["parser"]


def candidate_cursor():
    if "cursor" not in _state:
        from tree_sitter import Query, QueryCursor

        _state["cursor"] = QueryCursor(Query(_language(), CANDIDATE_QUERY))
    return _state["cursor"]


def text(node: Node) -> str:
    return node.text.decode("utf-8", errors="replace")


def compact(node: Node) -> str:
    """Node text without whitespace, so `self . optim` and a split receiver compare equal."""
    return "".join(text(node).split())


FUNCTION_KINDS = frozenset({"function_item", "closure_expression"})
ITEM_KINDS = frozenset({"function_item", "impl_item", "mod_item", "trait_item"})
LOOP_KINDS = frozenset({"for_expression", "while_expression", "loop_expression"})


def enclosing(node: Node, kinds: frozenset[str]) -> Node | None:
    current = node.parent
    while current is not None:
        if current.type in kinds:
            return current
        current = current.parent
    return None


def enclosing_function(node: Node) -> Node | None:
    """The innermost `fn` item; closures share their function's bindings."""
    return enclosing(node, frozenset({"function_item"}))


def block_tail(block: Node) -> Node | None:
    """The last expression of a block, comments aside (its value when it has no `;`)."""
    for child in reversed(block.named_children):
        if child.type not in ("line_comment", "block_comment"):
            return child
    return None


def arguments_of(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    if args is None:
        return []
    return [c for c in args.named_children if c.type not in ("line_comment", "block_comment", "attribute_item")]


def callee(call: Node) -> Node | None:
    """The called expression without turbofish arguments: `x.init::<B>` → `x.init`."""
    function = call.child_by_field_name("function")
    if function is not None and function.type == "generic_function":
        function = function.child_by_field_name("function")
    return function


def method_name(call: Node) -> str | None:
    function = callee(call)
    if function is not None and function.type == "field_expression":
        name = function.child_by_field_name("field")
        return text(name) if name is not None else None
    return None


def receiver_of(call: Node) -> Node | None:
    function = callee(call)
    if function is not None and function.type == "field_expression":
        return function.child_by_field_name("value")
    return None


def method_call_on(node: Node) -> Node | None:
    """The call `node.m(..)` / `node.m::<..>(..)` when `node` is the receiver of one, else None."""
    field = node.parent
    if field is None or field.type != "field_expression" or field.child_by_field_name("value") != node:
        return None
    call = field.parent
    if call is not None and call.type == "generic_function":
        call = call.parent
    if call is None or call.type != "call_expression":
        return None
    return call if callee(call) == field else None


@dataclass
class SourceUnit:
    """One parsed file plus the candidate nodes every rule starts from."""

    path: str
    source: bytes
    tree: Tree
    captures: dict[str, list[Node]] = field(default_factory=dict)
    # Analyses shared by several rules (e.g. step sites for BS001 and BS003).
    memo: dict[str, object] = field(default_factory=dict)

    @classmethod
    def parse(cls, path: str, source: bytes) -> SourceUnit:
        tree = parser().parse(source)
        captures = candidate_cursor().captures(tree.root_node)
        for nodes in captures.values():
            nodes.sort(key=lambda n: n.start_byte)
        return cls(path=path, source=source, tree=tree, captures=captures)

    def nodes(self, capture: str) -> list[Node]:
        return self.captures.get(capture, [])

    @cached_property
    def lines(self) -> list[bytes]:
        return self.source.split(b"\n")

    def column(self, row: int, byte_column: int) -> int:
        """1-based character column for a 0-based row and byte offset."""
        if row >= len(self.lines):
            return byte_column + 1
        return len(self.lines[row][:byte_column].decode("utf-8", errors="replace")) + 1

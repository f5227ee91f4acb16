"""Parsed Rust source: the tree-sitter language, the candidate-node query, and `SourceUnit`.

Everything that needs tree-sitter is created lazily and once per process, so that
`import burnside.lint` stays cheap and worker processes build their own parser.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Tree

# Candidate nodes are found from the rules' tokens in the bytes: every spot
# where `step`, `from_grads`, `new`, `MomentumConfig` or `Norm` is spelled is looked up
# in the tree (one descent in C), and kept when it is the right identifier of
# the right node. Code inside comments, string literals and macro token trees
# never becomes a call_expression in tree-sitter-rust, so those drop out for
# free. A query over the whole tree found the same nodes but cost as much as a
# third of the parse, since it visits every node of files that are mostly not
# training code.
_CANDIDATE_TOKENS = re.compile(rb"\b(?:step|from_grads|new|MomentumConfig|Norm)\b")


def find_candidates(root: Node, source: bytes) -> dict[str, list[Node]]:
    """The call and literal nodes the rules start from, sorted by position.

    `step_call`: `X.step(..)` / `X.step::<..>(..)`; `scoped_call`: `P::from_grads(..)`
    and `P::new(..)`; `momentum_struct`: `MomentumConfig { .. }` literals; `clip_norm`:
    `GradientClippingConfig::Norm(..)` and `GradientClipping::Norm(..)`.
    """
    found: dict[str, list[Node]] = {"step_call": [], "scoped_call": [], "momentum_struct": [], "clip_norm": []}
    for match in _CANDIDATE_TOKENS.finditer(source):
        name = root.descendant_for_byte_range(match.start(), match.end())
        if name is None or name.start_byte != match.start() or name.end_byte != match.end():
            continue
        parent = name.parent
        if parent is None:
            continue
        token = match.group()
        if token == b"step":
            if name.type != "field_identifier" or parent.type != "field_expression":
                continue
            call = parent.parent
            if call is not None and call.type == "generic_function":
                call = call.parent
            if call is not None and call.type == "call_expression" and callee(call) == parent:
                found["step_call"].append(call)
        elif token == b"MomentumConfig":
            if (name.type == "type_identifier" and parent.type == "struct_expression"
                    and parent.child_by_field_name("name") == name):
                found["momentum_struct"].append(parent)
        elif (name.type == "identifier" and parent.type == "scoped_identifier"
                and parent.child_by_field_name("name") == name):
            call = parent.parent
            if call is None or call.type != "call_expression" or call.child_by_field_name("function") != parent:
                continue
            if token != b"Norm":
                found["scoped_call"].append(call)
                continue
            path = parent.child_by_field_name("path")
            last = path.child_by_field_name("name") if path is not None and path.type == "scoped_identifier" else path
            if last is not None and last.text in (b"GradientClippingConfig", b"GradientClipping"):
                found["clip_norm"].append(call)
    for nodes in found.values():
        nodes.sort(key=lambda n: n.start_byte)
    return found


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


def query_cursor(pattern: str):
    """A tree-sitter query cursor for `pattern` over Rust, compiled once per process."""
    cursors = _state.setdefault("cursors", {})
    cursor = cursors.get(pattern)
    if cursor is None:
        from tree_sitter import Query, QueryCursor

        cursor = cursors[pattern] = QueryCursor(Query(_language(), pattern))
    return cursor


# tree-sitter finds a node's parent by walking down from the root, so climbing
# from a node n levels deep costs n² steps: minutes for a 10,000-deep chain.
# One descent from the root records every ancestor on the way instead.
_parents: dict[int, Node | None] = {}
_roots: list[Node] = []


def _register_tree(root: Node) -> None:
    """Make `parent_of` able to find ancestors of nodes in this tree (until `forget_parents`)."""
    _roots.append(root)


def forget_parents() -> None:
    _parents.clear()
    _roots.clear()


def _descend(root: Node, node: Node) -> bool:
    target = node.id
    cursor = root.walk()
    above = None
    current = cursor.node
    while current.id != target:
        _parents[current.id] = above
        if cursor.goto_first_child_for_byte(node.start_byte) is None:
            return False
        above, current = current, cursor.node
        if current.start_byte > node.start_byte or current.end_byte < node.end_byte:
            return False
    _parents[target] = above
    return True


def parent_of(node: Node) -> Node | None:
    """`node.parent`, in time linear in the node's depth over all its ancestors."""
    key = node.id
    if key in _parents:
        return _parents[key]
    if node.start_byte < node.end_byte:
        for root in reversed(_roots):
            if root.start_byte <= node.start_byte and node.end_byte <= root.end_byte and _descend(root, node):
                return _parents[key]
    return node.parent


def text(node: Node) -> str:
    return node.text.decode("utf-8", errors="replace")


def compact(node: Node) -> str:
    """Node text without whitespace, so `self . optim` and a split receiver compare equal."""
    return "".join(text(node).split())


ITEM_KINDS = frozenset({"function_item", "impl_item", "mod_item", "trait_item"})
LOOP_KINDS = frozenset({"for_expression", "while_expression", "loop_expression"})


def enclosing(node: Node, kinds: frozenset[str]) -> Node | None:
    current = parent_of(node)
    while current is not None:
        if current.type in kinds:
            return current
        current = parent_of(current)
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
    field = parent_of(node)
    if field is None or field.type != "field_expression" or field.child_by_field_name("value") != node:
        return None
    call = parent_of(field)
    if call is not None and call.type == "generic_function":
        call = parent_of(call)
    if call is None or call.type != "call_expression":
        return None
    return call if callee(call) == field else None


@dataclass
class SourceUnit:
    """One parsed file plus the candidate nodes every rule starts from."""

    path: str
    source: bytes
    tree: Tree
    # Found on first use: units parsed only to follow a config across files never need them.
    captures: dict[str, list[Node]] | None = None
    # Analyses shared by several rules (e.g. step sites for BS001 and BS003).
    memo: dict[str, object] = field(default_factory=dict)
    # Rows of this unit start this many lines into the file (a piece of a large file).
    line_offset: int = 0

    @classmethod
    def parse(cls, path: str, source: bytes, line_offset: int = 0, tree: Tree | None = None) -> SourceUnit:
        """Parse `source` (or take its already parsed `tree`) and make its ancestors findable."""
        if tree is None:
            tree = parser().parse(source)
        _register_tree(tree.root_node)
        return cls(path=path, source=source, tree=tree, line_offset=line_offset)

    def line(self, node: Node) -> int:
        """1-based line of a node in the whole file."""
        return node.start_point.row + 1 + self.line_offset

    def nodes(self, capture: str) -> list[Node]:
        if self.captures is None:
            self.captures = find_candidates(self.tree.root_node, self.source)
        return self.captures.get(capture, [])

    @cached_property
    def lines(self) -> list[bytes]:
        return self.source.split(b"\n")

    def column(self, row: int, byte_column: int) -> int:
        """1-based character column for a 0-based row and byte offset."""
        if row >= len(self.lines):
            return byte_column + 1
        return len(self.lines[row][:byte_column].decode("utf-8", errors="replace")) + 1


# Files above this size are cut into top-level items and only the items that
# contain a rule's token are parsed: parsing is the one cost that grows with
# the file rather than with the training code in it.
SPLIT_BYTES = 1 << 20
# Files above this size (and up to SPLIT_BYTES) are cut the same way by the
# engine, which keeps the cut only when every piece parses without a syntax
# error (a cut inside a raw string or a macro leaves one) and otherwise parses
# the whole file: a third of real trees' parsed bytes sat in a few such files.
GUARDED_SPLIT_BYTES = 128 << 10
_PIECE_BYTES = 256 << 10
# A top-level item ends at a `}` alone on its line at column 0 (rustfmt's layout).
_ITEM_END = re.compile(rb"\n\}[ \t]*\r?\n")


def pieces(source: bytes, tokens: re.Pattern[bytes], split_above: int = SPLIT_BYTES) -> list[tuple[int, int, bytes]]:
    """(first line, start byte, bytes) of each top-level item of `source` that matches `tokens`.

    A source up to `split_above` bytes is one piece. A `}` at column 0 inside a
    raw string can cut an item in two; each half is then parsed on its own, as
    rustc never would, which only costs precision on that item.
    """
    if len(source) <= split_above:
        return [(0, 0, source)] if tokens.search(source) else []
    ends = [m.end() for m in _ITEM_END.finditer(source)]
    ends.append(len(source))
    wanted: list[int] = []
    for match in tokens.finditer(source):
        index = bisect.bisect_right(ends, match.start())
        if not wanted or wanted[-1] != index:
            wanted.append(index)
    # Neighbouring items that both need parsing are parsed together, up to a size.
    spans: list[list[int]] = []
    for index in wanted:
        start = ends[index - 1] if index > 0 else 0
        if spans and spans[-1][1] == start and spans[-1][1] - spans[-1][0] < _PIECE_BYTES:
            spans[-1][1] = ends[index]
        else:
            spans.append([start, ends[index]])
    result = []
    line, counted_to = 0, 0
    for start, end in spans:
        line += source.count(b"\n", counted_to, start)
        counted_to = start
        result.append((line, start, source[start:end]))
    return result

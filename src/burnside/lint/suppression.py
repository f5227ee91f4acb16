"""`// burnside: allow(BS001, ...)` comments and the test-code severity drop.

An allow comment suppresses a finding when it sits on the finding's line, on the
line above it, or on (or among the attributes and comments directly above) any
enclosing `fn`, `impl`, `mod` or `trait` item.

Findings inside `#[cfg(test)]` modules or `#[test]` functions are demoted one
level (error → warning, warning → info, info stays info): tests routinely step an
optimizer only to inspect its state, but a discarded step there can still hide a
broken assertion, so it is shown rather than dropped.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from burnside.lint.syntax import ITEM_KINDS, parent_of, text

if TYPE_CHECKING:
    from tree_sitter import Node

_ALLOW_RE = re.compile(rb"burnside:\s*allow\(([^)]*)\)")
_TEST_ATTRIBUTE_RE = re.compile(r"^#\[\s*((\w+\s*::\s*)*test\s*[\](]|cfg\s*\((?!.*\bnot\s*\().*\btest\b)")
_TEST_FN_RE = re.compile(r"^#\[\s*(\w+\s*::\s*)*test\s*[\](]")
_PREFIX_KINDS = frozenset({"attribute_item", "line_comment", "block_comment"})


class AllowComments:
    """Rule ids allowed per 0-based line of one file."""

    def __init__(self, source: bytes) -> None:
        self.by_line: dict[int, set[str]] = {}
        if b"burnside" not in source:
            return
        for row, line in enumerate(source.split(b"\n")):
            for match in _ALLOW_RE.finditer(line):
                ids = {part.strip().upper() for part in match.group(1).decode("ascii", "replace").split(",")}
                self.by_line.setdefault(row, set()).update(i for i in ids if i)

    def allows(self, rule: str, row: int, node: Node) -> bool:
        if not self.by_line:
            return False
        if self._on(rule, row) or self._on(rule, row - 1):
            return True
        for item in _enclosing_items(node):
            first, last = _item_header_rows(item)
            if any(self._on(rule, r) for r in range(first, last + 1)):
                return True
        return False

    def _on(self, rule: str, row: int) -> bool:
        ids = self.by_line.get(row)
        return bool(ids) and (rule in ids or "ALL" in ids)


def _enclosing_items(node: Node):
    current = parent_of(node)
    while current is not None:
        if current.type in ITEM_KINDS:
            yield current
        current = parent_of(current)


def _leading_siblings(item: Node):
    """Attributes and comments directly above an item (tree-sitter keeps them as siblings)."""
    sibling = item.prev_sibling
    while sibling is not None and sibling.type in _PREFIX_KINDS:
        yield sibling
        sibling = sibling.prev_sibling


def _item_header_rows(item: Node) -> tuple[int, int]:
    first = item.start_point.row
    for sibling in _leading_siblings(item):
        first = min(first, sibling.start_point.row)
    return first, item.start_point.row


def in_test_code(node: Node) -> bool:
    """Whether `node` sits in a `#[cfg(test)]` item or a `#[test]`-style function."""
    for item in _enclosing_items(node):
        for sibling in _leading_siblings(item):
            if sibling.type == "attribute_item" and _TEST_ATTRIBUTE_RE.match(text(sibling)):
                return True
    return False


def is_test_function(function: Node) -> bool:
    """Whether a `fn` item carries `#[test]` (or `#[tokio::test]` and the like)."""
    return any(
        sibling.type == "attribute_item" and _TEST_FN_RE.match(text(sibling))
        for sibling in _leading_siblings(function)
    )

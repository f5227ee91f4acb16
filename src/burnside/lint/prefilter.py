"""The byte-level prefilter: which files are worth parsing, built from the tokens each lint rule declares.

A rule's ``TOKENS`` are what a file must contain for the rule to find anything in it: plain byte strings
(``b"AdamConfig"``), or `method_call` for a method called by name. Most Rust files hold none of any rule's
tokens, so they are never parsed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

# A stem shorter than this would be in too many files to spare the scans for its tokens.
_MIN_STEM = 4


@dataclass(frozen=True)
class MethodCall:
    """A method called by name: ``.name(`` or ``.name::<M>(``, but not ``fn name(``, ``time_name(`` or
    ``Self::name(``: for `step`, those alone made half the parsed bytes of real trees."""

    name: bytes

    @property
    def pattern(self) -> bytes:
        return rb"\.\s*" + re.escape(self.name) + rb"\s*(?:\(|::)"


def method_call(name: bytes) -> MethodCall:
    """The token of a call of the method ``name``."""
    return MethodCall(name)


@dataclass(frozen=True)
class Prefilter:
    """The scan plan: ``pattern`` finds any rule's token (large files are cut into pieces around its hits);
    `needs_parsing` gives the same answer as ``pattern.search`` with plain substring tests, which run at memchr
    speed, and the regex only to confirm a method call."""

    pattern: re.Pattern[bytes]
    calls: tuple[tuple[bytes, re.Pattern[bytes]], ...]  # a method's name, then the regex of its call
    plain: tuple[tuple[bytes, tuple[bytes, ...]], ...]  # a stem, then the tokens holding it (none: the stem is one)

    def needs_parsing(self, source: bytes) -> bool:
        """Whether ``source`` holds any rule's token."""
        for name, call in self.calls:
            if name in source and call.search(source) is not None:
                return True
        for stem, tokens in self.plain:
            if stem in source and (not tokens or any(token in source for token in tokens)):
                return True
        return False


def _stem(tokens: list[bytes], others: list[bytes]) -> bytes:
    """The longest substring of every one of ``tokens`` and of none of ``others`` (b"" when none is long enough):
    a file that holds it likely holds one of them, so one scan for it spares a scan per token in most files."""
    first = tokens[0]
    for size in range(len(first), _MIN_STEM - 1, -1):
        for start in range(len(first) - size + 1):
            stem = first[start:start + size]
            if all(stem in t for t in tokens[1:]) and not any(stem in o for o in others):
                return stem
    return b""


def build(rules: Iterable[ModuleType]) -> Prefilter:
    """The prefilter of ``rules``, in their order: each rule's plain tokens not already scanned for are one scan
    for their stem (`_stem`) when they share one, else a scan each."""
    rules = list(rules)
    calls: list[MethodCall] = []
    plain: list[bytes] = []
    groups: list[list[bytes]] = []
    for rule in rules:
        fresh = []
        for token in rule.TOKENS:
            if isinstance(token, MethodCall):
                if token not in calls:
                    calls.append(token)
            elif token not in plain:
                plain.append(token)
                fresh.append(token)
        if fresh:
            groups.append(fresh)
    every = [t for rule in rules for t in rule.TOKENS if not isinstance(t, MethodCall)]
    scans: list[tuple[bytes, tuple[bytes, ...]]] = []
    for group in groups:
        stem = _stem(group, [t for t in every if t not in group]) if len(group) > 1 else b""
        scans += [(stem, tuple(group))] if stem else [(token, ()) for token in group]
    pattern = re.compile(b"|".join([c.pattern for c in calls] + [re.escape(t) for t in plain]))
    return Prefilter(pattern, tuple((c.name, re.compile(c.pattern)) for c in calls), tuple(scans))

"""Names present on one side only that are the same tensor under another name.

A port that records a norm layer as `bn.gamma` while PyTorch says `bn.weight` would otherwise
show as two unrelated lists (every step's params, grads and optimizer moments: 84 lines for
one BatchNorm). Pairing them names the rename once and says how to fix it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# burn's names for what PyTorch calls otherwise, as whole path segments.
_KNOWN = {"gamma": "weight", "beta": "bias"}
_CUTOFF = 0.75  # difflib ratio for an unknown near match


@dataclass(frozen=True)
class RenamedPair:
    """One tensor that A and B record under different names."""

    a: str
    b: str
    known: bool  # a rename burn and PyTorch are known to make (gamma/weight, beta/bias)


def _canonical(name: str) -> str:
    return ".".join(_KNOWN.get(segment, segment) for segment in name.split("."))


def _prefix(name: str) -> str:
    """`step3.grads`, or for optimizer state `step3.optim.exp_avg`: names pair only within one step, stage and
    slot (Adam's `step` counter of a parameter is not its `exp_avg` under another name)."""
    match = re.match(r"^(step\d+\.optim\.[a-z_]+|step\d+\.[a-z_]+)\.", name)
    return match.group(1) if match else ""


def pair_renamed(only_a: list[str], only_b: list[str]) -> tuple[list[RenamedPair], list[str], list[str]]:
    """Pair names of the same step and stage that differ by a known rename or look alike.

    Returns the pairs and what stays unpaired on each side, in the input order.
    """
    pairs: list[RenamedPair] = []
    left_b = list(only_b)
    by_canonical = {}
    for name in left_b:
        by_canonical.setdefault(_canonical(name), name)
    unpaired_a = []
    for name in only_a:
        match = by_canonical.get(_canonical(name))
        if match is not None and match in left_b and _prefix(match) == _prefix(name):
            pairs.append(RenamedPair(name, match, True))
            left_b.remove(match)
            continue
        candidates = [b for b in left_b if _prefix(b) == _prefix(name)]
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=_CUTOFF)
        if close:
            pairs.append(RenamedPair(name, close[0], False))
            left_b.remove(close[0])
        else:
            unpaired_a.append(name)
    return pairs, unpaired_a, left_b


def rename_rules(pairs: list[RenamedPair]) -> list[tuple[str, str, int]]:
    """The distinct renames behind the pairs: (A's name, B's name) without step and stage, and how many."""
    seen: dict[tuple[str, str], int] = {}
    for pair in pairs:
        a_rest = pair.a.split(".", 2)[2] if pair.a.count(".") >= 2 else pair.a
        b_rest = pair.b.split(".", 2)[2] if pair.b.count(".") >= 2 else pair.b
        if pair.a.split(".")[1] == "optim":  # `optim.{slot}.{param}`: the param is the rename
            a_rest, b_rest = a_rest.split(".", 1)[-1], b_rest.split(".", 1)[-1]
        seen[(a_rest, b_rest)] = seen.get((a_rest, b_rest), 0) + 1
    return [(a, b, count) for (a, b), count in seen.items()]

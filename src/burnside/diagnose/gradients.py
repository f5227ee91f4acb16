"""Which parameters each side got gradients for at a step, and whether that step's forward differs: what D002, D008
and D012 read."""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.trace import parse_name


def forward_differs(comparison: Comparison, step: int) -> str | None:
    """The first logits/loss tensor of ``step`` out of tolerance (the forward differs), or None."""
    for row in comparison.rows:
        parsed = parse_name(row.name)
        if parsed is not None and parsed.step == step and parsed.stage in ("logits", "loss") and not row.passed:
            return row.name
    return None


def missing_grads(comparison: Comparison, side: str, step: int) -> list[str]:
    """The parameters the other side has a gradient for at ``step`` and ``side`` has not."""
    only = comparison.only_in_b if side == "a" else comparison.only_in_a
    return sorted({p.rest for p in map(parse_name, only) if p is not None and p.stage == "grads" and p.step == step})


def short_steps(comparison: Comparison) -> list[tuple[str, int, int, int]]:
    """(side, step, its gradient count, the other's) for each step where a side got fewer gradients."""
    found = []
    for side, mine, theirs in (("a", comparison.a, comparison.b), ("b", comparison.b, comparison.a)):
        for k in sorted(mine.grads_len):
            other = theirs.grads_len.get(k)
            if other is not None and mine.grads_len[k] < other:
                found.append((side, k, mine.grads_len[k], other))
    return found

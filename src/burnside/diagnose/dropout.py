"""Whether a comparison's first divergence is a dropout's random mask: what D013 names, and what D010 leaves to it."""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.forensics import evidence_of
from burnside.forensics.dropout import DROPOUT
from burnside.trace import parse_name


def recorded_with_dropout(comparison: Comparison) -> list[tuple[str, str]]:
    """(side, its dropouts) for each side whose trace says it was recorded with dropout on."""
    found = []
    for side, summary in (("a", comparison.a), ("b", comparison.b)):
        said = summary.metadata.get("dropout")
        if isinstance(said, str) and said.startswith("on"):
            found.append((side, said.removeprefix("on").lstrip(": ")))
    return found


def is_dropout_divergence(comparison: Comparison) -> bool:
    """Whether the first divergence is a dropout: one side's values measured as the other's with a dropout
    applied, a forward row of a comparison where a side was recorded with dropout on, or, in a training trace,
    a dropout layer's output whose input agrees.

    The input is what A recorded feeding the dropout (`layer_inputs`) when it is not the activation before it
    (a functional ReLU or GELU between them): agreeing only when B recorded it too and it agrees. In a forward
    trace a dropout is off on the side recorded for inference, so a dropout's output that differs is a dropout
    only when one side's values are measured as the other's zeroed and scaled by 1/(1 - p)."""
    first = comparison.first_divergence
    parsed = parse_name(first.name) if first is not None else None
    if parsed is None or parsed.stage not in ("activations", "logits", "outputs", "loss"):
        return False
    if evidence_of(comparison).dropout is not None:
        return True
    if recorded_with_dropout(comparison):
        return True
    if parsed.stage != "activations" or is_forward(comparison):
        return False
    kind, before = comparison.layer_of(first)
    return kind in DROPOUT and _input_agrees(comparison, before)


def is_forward(comparison: Comparison) -> bool:
    return any(side.metadata.get("kind") == "forward" for side in (comparison.a, comparison.b))


def _input_agrees(comparison: Comparison, before) -> bool:
    """Whether the dropout at the first divergence is fed the same on both sides, as far as recorded."""
    fed = evidence_of(comparison).dropout_input
    if fed is not None and fed.input_is_before is not True:
        row = next((r for r in comparison.rows if r.name == fed.input), None)
        return row is not None and row.passed
    return before is None or before.passed

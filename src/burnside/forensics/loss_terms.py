"""Which part of a loss of several terms the port computes otherwise, from the terms PyTorch's recorder measured.

A loss that is no single `torch.nn.functional` call (a VAE's BCE summed plus a KL term written by hand, divided by
the batch) is recorded by the PyTorch side as terms (metadata `loss_terms`, `burnside.recording.loss.LossCall.terms`):
each call's function, settings, value at every step and weight in the loss (the loss's derivative by it). What the
calls do not compute is the rest, `loss - sum(weight * value)`: the hand-written part.

When a step's loss is the first tensor to part and its outputs agree, the port's terms are PyTorch's (they are
computed from the same outputs), so the port's loss against PyTorch's says which part differs. One number, the
port's loss, is explained by one change at a time, the simplest first:

- a term's reduction: the port's loss is PyTorch's with that call averaged where it sums (or summed where it
  averages) over its input's elements;
- the rest scaled by a round factor: -1 (its sign flipped), 2 or 1/2 (a 0.5 left out or added), 0 (left out);
- a term's weight scaled by a round factor (a term left out, counted twice, not divided by the batch);
- else the rest differs by the measured factor: the hand-written part computes something else.

Each side's loss carries the rounding of a float32 sum of the outputs' elements (`rounding.sum_half_ulps`); a
factor is named only where that rounding cannot blur it into another one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnside.compare.rounding import HALF_ULP, SUM_FACTOR
from burnside.trace import parse_name

if TYPE_CHECKING:
    from burnside.compare.comparison import Comparison

#: Round factors named for the rest of the loss or a term's weight, and what each says.
_FACTORS = {-1.0: "flipped in sign", 2.0: "twice PyTorch's (a factor 0.5 left out)",
            0.5: "half PyTorch's (a factor 0.5 added)",
            -2.0: "-2 times PyTorch's (its sign flipped and a 0.5 left out)",
            -0.5: "-0.5 times PyTorch's (its sign flipped and a 0.5 added)", 0.0: "left out"}


@dataclass(frozen=True)
class TermsFit:
    """The part of a loss of several terms that explains the port's loss at the first step it parts."""

    step: int
    cause: str  # what the port computes otherwise
    fix: str


def _call(term: dict) -> str:
    """`binary_cross_entropy_with_logits(logits, inputs.x, reduction='sum')`."""
    settings = ", ".join(f"{key}={value!r}" for key, value in term.items()
                         if key not in ("fn", "input", "target", "elements", "values", "weights"))
    args = ", ".join(str(term.get(key) or "a tensor it computed") for key in ("input", "target"))
    return f"F.{term['fn']}({args}{', ' + settings if settings else ''})"


def _factor(ratio: float, blur: float) -> float | None:
    """The round factor within ``blur`` of ``ratio`` and nearer it than any other, or None."""
    near = sorted(_FACTORS, key=lambda f: abs(ratio - f))
    best = near[0]
    if abs(ratio - best) <= max(blur, 0.01 * abs(best)) and abs(ratio - near[1]) > max(blur, 0.01 * abs(best)):
        return best
    return None


def measure_terms(comparison: Comparison) -> TermsFit | None:
    """The part of the loss the port computes otherwise, where the first divergence is a step's loss, that step's
    outputs agree and the PyTorch side recorded the loss's terms; None otherwise, or where no single change
    explains the port's loss beyond its rounding."""
    first = comparison.first_divergence
    parsed = parse_name(first.name) if first is not None else None
    if parsed is None or parsed.stage != "loss":
        return None
    k = parsed.step
    outputs = [r for r in comparison.rows if r.name == f"step{k}.logits" or r.name.startswith(f"step{k}.outputs.")]
    if not outputs or not all(r.passed for r in outputs):
        return None
    model = "a" if isinstance(comparison.a.metadata.get("loss_terms"), list) else "b"
    terms = (comparison.a if model == "a" else comparison.b).metadata.get("loss_terms")
    if not isinstance(terms, list) or not terms:
        return None
    port = "b" if model == "a" else "a"
    mine = (comparison.a if model == "a" else comparison.b).losses.get(k)
    theirs = (comparison.b if model == "a" else comparison.a).losses.get(k)
    try:
        values = [float(t["values"][k]) for t in terms]
        weights = [float(t["weights"][k]) for t in terms]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if mine is None or theirs is None:
        return None
    elements = max((r.stats.n for r in outputs), default=1)
    # the rounding each side's loss may carry, as a float32 sum of the outputs' elements
    blur = 2 * SUM_FACTOR * elements ** 0.5 * HALF_ULP * max(abs(mine), abs(theirs))
    who, pytorch = comparison.side_name(port), comparison.side_name(model)
    rest = mine - sum(w * v for w, v in zip(weights, values, strict=True))
    # a term's reduction
    for term, value, weight in zip(terms, values, weights, strict=True):
        n, reduction = term.get("elements"), term.get("reduction")
        if not isinstance(n, int) or n < 2 or reduction not in ("sum", "mean"):
            continue
        other = value / n if reduction == "sum" else value * n
        if abs(theirs - (mine + weight * (other - value))) <= blur:
            kind = "averages" if reduction == "sum" else "sums"
            fix = ("sum it over the elements: the elementwise loss and `.sum()`, or `Reduction::Sum` where burn's loss "
                   "takes a reduction (burn's BinaryCrossEntropyLoss and CrossEntropyLoss average)"
                   if reduction == "sum" else
                   "average it over the elements: `.mean()`, or `Reduction::Mean` where burn's loss takes a reduction")
            return TermsFit(k, f"{who}'s loss is {pytorch}'s with the term {_call(term)} {kind} over its {n} "
                               f"elements (PyTorch's {reduction}s them): {theirs:.7g} against {mine:.7g}, and "
                               f"{mine + weight * (other - value):.7g} predicted so",
                            f"compute the term {_call(term)} as PyTorch does: {fix}")
    # the rest of the loss (what the calls do not compute) scaled
    said = ", ".join(_call(t) for t in terms)
    theirs_rest = theirs - sum(w * v for w, v in zip(weights, values, strict=True))
    if abs(rest) > 4 * blur:
        ratio = theirs_rest / rest
        factor = _factor(ratio, blur / abs(rest))
        if factor is not None:
            return TermsFit(k, f"in {who}'s loss the hand-written part, what it adds to {said} as weighted "
                               f"({rest:.6g} in {pytorch}, {theirs_rest:.6g} in {who}), is {_FACTORS[factor]}: "
                               f"{ratio:.4g}x; the terms the loss functions compute agree (the outputs they read do)",
                            "compute the hand-written part of the loss as PyTorch's loss function does"
                            + {-1.0: ": its sign (a KL divergence is -0.5 * sum(1 + logvar - mu^2 - exp(logvar)))",
                               2.0: ": the factor 0.5 it leaves out", 0.5: ": without the extra 0.5",
                               0.0: ": add it to the loss"}.get(factor, f": {ratio:.4g}x is its factor off"))
    for i, (term, value, weight) in enumerate(zip(terms, values, weights, strict=True)):
        if not weight or not value:
            continue
        others = sum(w * v for j, (w, v) in enumerate(zip(weights, values, strict=True)) if j != i)
        ratio = (theirs - rest - others) / (weight * value)
        factor = _factor(ratio, blur / abs(weight * value))
        if factor is not None and factor != 1.0:
            return TermsFit(k, f"{who}'s loss weighs the term {_call(term)} "
                               f"{_FACTORS[factor] if factor else 'at 0: it is left out'} "
                               f"({ratio:.4g}x the weight {weight:g} PyTorch's loss gives it)",
                            f"weigh {_call(term)} in the loss as PyTorch does ({weight:g} of it; a division by the "
                            "batch or a coefficient)")
    if rest:
        # the loss parted beyond rounding (the comparison's first divergence): the part the calls do not compute
        return TermsFit(k, f"in {who}'s loss the hand-written part, what it adds to {said} as weighted, is "
                           f"{theirs_rest:.6g} where {pytorch}'s is {rest:.6g}"
                           + (f" ({theirs_rest / rest:.4g}x)" if abs(rest) > blur else "")
                           + "; the terms the loss functions compute agree (the outputs they read do)",
                        "compute the hand-written part of the loss as PyTorch's loss function does, term by term "
                        "(each factor, sign and exponent: `exp(logvar)` where `exp(0.5 * logvar)` is meant, or the "
                        "reverse)")
    return None

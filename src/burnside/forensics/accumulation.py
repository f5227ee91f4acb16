"""How each side of two accumulating traces scaled its loss and its accumulated gradient (the evidence D018
names): the ratio of PyTorch's micro-batch losses to the port's, and of PyTorch's step-0 gradients to the
port's, each measured from the numbers of the first step, where both sides start from the same parameters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from burnside.trace import Trace, parse_name

#: How close a measured ratio must be to M or 1/M (relative) to be called that: float32 rounding of a
#: loss or a gradient divided by M is far below it, another slip (a label smoothing, another batch) far above.
RATIO_TOLERANCE = 1e-4


@dataclass(frozen=True)
class AccumulationFit:
    """Step 0 of two traces that accumulate the same M micro-batches per optimizer step."""

    micro_batches: int
    #: A's micro-batch losses over B's, one per micro-batch (None where one is 0 or missing)
    loss_ratios: tuple[float | None, ...]
    #: the least-squares factor g_A ≈ ratio · g_B over every parameter's step-0 gradient, and the residual
    #: |g_A − ratio · g_B| / |g_A| it leaves (0 for gradients that are exact multiples)
    grads_ratio: float | None
    grads_residual: float | None

    def scaled_by(self, ratios: tuple[float | None, ...] | float | None) -> float | None:
        """M or 1/M when every given ratio is that within `RATIO_TOLERANCE`, None otherwise."""
        values = ratios if isinstance(ratios, tuple) else (ratios,)
        if not values or any(r is None for r in values):
            return None
        for factor in (float(self.micro_batches), 1.0 / self.micro_batches):
            if all(abs(r / factor - 1.0) <= RATIO_TOLERANCE for r in values):  # type: ignore[operator]
                return factor
        return None

    @property
    def loss_factor(self) -> float | None:
        """M when A's every micro-batch loss is M times B's, 1/M when it is B's divided by M, else None."""
        return self.scaled_by(self.loss_ratios)

    @property
    def grads_factor(self) -> float | None:
        """M or 1/M when A's step-0 gradients are that multiple of B's (and nothing else differs), else None."""
        if self.grads_residual is None or self.grads_residual > RATIO_TOLERANCE:
            return None
        return self.scaled_by(self.grads_ratio)


def _accumulate(trace: Trace) -> int:
    value = trace.metadata.get("accumulate")
    return value if type(value) is int else 1


def measure_accumulation(a: Trace, b: Trace) -> AccumulationFit | None:
    """The step-0 ratios of two traces that both accumulate the same M >= 2 micro-batches; None otherwise."""
    m = _accumulate(a)
    if m < 2 or _accumulate(b) != m or a.kind != "training":
        return None
    names_b = set(b.names)
    ratios: list[float | None] = []
    for j in range(m):
        name = f"step0.micro_loss.{j}"
        if name not in names_b or name not in a.names:
            ratios.append(None)
            continue
        la, lb = float(np.asarray(a.array(name))), float(np.asarray(b.array(name)))
        ratios.append(la / lb if lb != 0.0 and np.isfinite(la) and np.isfinite(lb) else None)
    dot = norm_b = norm_a = 0.0
    grads = [n for n in a.names if (p := parse_name(n)) is not None and p.step == 0 and p.stage == "grads"
             and n in names_b]
    for name in grads:
        ga = np.asarray(a.array(name), dtype=np.float64).reshape(-1)
        gb = np.asarray(b.array(name), dtype=np.float64).reshape(-1)
        a.release(name)
        b.release(name)
        if ga.shape != gb.shape or not (np.isfinite(ga).all() and np.isfinite(gb).all()):
            return AccumulationFit(m, tuple(ratios), None, None)
        dot += float(ga @ gb)
        norm_a += float(ga @ ga)
        norm_b += float(gb @ gb)
    if norm_b == 0.0 or norm_a == 0.0:
        return AccumulationFit(m, tuple(ratios), None, None)
    ratio = dot / norm_b
    # |g_A - r g_B|^2 = |g_A|^2 - 2 r <g_A, g_B> + r^2 |g_B|^2, with r = <g_A, g_B> / |g_B|^2
    residual = max(norm_a - dot * dot / norm_b, 0.0) ** 0.5 / norm_a ** 0.5
    return AccumulationFit(m, tuple(ratios), ratio, residual)


__all__ = ["RATIO_TOLERANCE", "AccumulationFit", "measure_accumulation"]

"""`RoundingReach`: how far rounding alone can carry a row's difference without a float64 reference (a part of
`Comparison`): the drift of the parameters a step starts from, and the rounding the layers before a row show."""

from __future__ import annotations

from burnside.compare.rounding import NOISE_FACTOR
from burnside.compare.rows import TensorRow
from burnside.trace import parse_name


class RoundingReach:
    """Rounding's reach in a `Comparison`, read from its ``rows``, ``a`` (A's metadata) and ``reference``."""

    def drift_before(self, step: int) -> float:
        """The largest |A - B| of step ``step``'s parameters before its update: 0 when the two sides start
        the step from bit-identical parameters (step 0 of a port loaded from the PyTorch init), above 0 once
        rounding (or a bug) has moved them apart."""
        worst = 0.0
        for row in self.rows:
            parsed = parse_name(row.name)
            if parsed is not None and parsed.step == step and parsed.stage == "params_before":
                worst = max(worst, row.stats.max_abs)
        return worst

    def rounding_upstream(self, row: TensorRow) -> float:
        """The largest |A - B| among the layer outputs recorded at ``row``'s step before it (A's execution order)
        that rounding can account for: each within tolerance, or out of it by no more than `NOISE_FACTOR` times the
        rounding shown before it in turn (a convolution's 1.3e-6 after 6e-8 upstream, which a GroupNorm then grows
        to 4.3e-6: a correct diffusion port had been told D010 at the norm). The rounding difference the two sides'
        arithmetic already shows on the way to ``row``; 0 when each is bit-identical (or none is recorded)."""
        parsed = parse_name(row.name)
        order = self.a.metadata.get("activations")
        if parsed is None or parsed.stage not in ("activations", "logits", "outputs") or not isinstance(order, list):
            return 0.0
        before = order[:order.index(parsed.rest)] if parsed.stage == "activations" and parsed.rest in order \
            else order
        by_name = {r.name: r for r in self.rows}
        upstream = 0.0
        for module in before:
            found = by_name.get(f"step{parsed.step}.activations.{module}")
            if found is None or found is row:
                continue
            if found.passed or found.stats.max_abs <= NOISE_FACTOR * upstream:
                upstream = max(upstream, found.stats.max_abs)
        return upstream

    def within_rounding_reach(self, row: TensorRow) -> bool:
        """Without a float64 reference, whether ``row``'s difference is no more than `NOISE_FACTOR` times the rounding
        difference already shown before it at its step (`rounding_upstream`): grown rounding can reach it, so
        nothing but a referee can tell it from a bug. Always False with a reference (which tells)."""
        if self.reference is not None:
            return False
        upstream = self.rounding_upstream(row)
        return 0.0 < row.stats.max_abs <= NOISE_FACTOR * upstream

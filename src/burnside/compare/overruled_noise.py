"""`overrule_noise`: a row the float64 referee calls noise that its layer's measured settings make a real difference.

A layer output beyond the tolerance that the reference judges rounding noise (each side within the noise band of
it) can still be a layer configured otherwise: a LayerNorm's epsilon 1e-6 against 1e-5 moves a norm's output by
~5e-6, within 32 times the other side's rounding. Where one side is far further off than the other, the layer's
settings are measured from its input and output on each side (`burnside.compare.layers`), and when they differ
the row is judged the off side's difference. A measurement of the two traces, so part of compare's verdict.
"""

from __future__ import annotations

from dataclasses import replace

from burnside.compare.comparison import Comparison
from burnside.compare.layers.settings import measure_layer
from burnside.trace import Trace, parse_name

#: How many times further from the float64 reference than the other side a layer output within the noise band
#: must be for its layer's settings to be measured (`overrule_noise`): framework rounding stays well below it.
NOISE_MEASURED_RATIO = 8.0


def overrule_noise(a: Trace, b: Trace, comparison: Comparison) -> None:
    """Judge again, in ``comparison.rows``, the first layer output before any real difference that is beyond the
    tolerance, called noise by the reference, with one side `NOISE_MEASURED_RATIO` times further off than the
    other: its layer's settings are measured on each side, and when they differ the row's verdict becomes the
    off side, with why (`RefStats.overruled`). Only the first such layer is measured, as at a first divergence."""
    first = comparison.first_divergence
    for i, row in enumerate(comparison.rows):
        if first is not None and comparison.order.get(row.name, 0) >= comparison.order.get(first.name, 0):
            return
        parsed = parse_name(row.name)
        if row.ref is None or not row.ref.noise or not row.stats.out_of_tol or parsed is None \
                or parsed.stage != "activations":
            continue
        far, near = max(row.ref.dist_a, row.ref.dist_b), min(row.ref.dist_a, row.ref.dist_b)
        if far < NOISE_MEASURED_RATIO * near:
            continue
        layer = measure_layer(a, b, row.name)
        apart = layer.differing() if layer is not None else []
        if apart:
            side = "a" if row.ref.dist_a > row.ref.dist_b else "b"
            shown = "; ".join(f"{key} {va} on A, {vb} on B" for key, va, vb in apart)
            comparison.rows[i] = replace(row, ref=replace(row.ref, verdict=side,
                                                          overruled=f"its layer's settings measure apart ({shown})"))
        return

"""Plots a person would rather see than read: loss curves, per-step drift, the distance to the float64
reference, a layer's differences and the distribution of one tensor's differences.

Each `*_axis` function draws one view on a matplotlib axis; `plot_drift` (`--plot`) puts three of
them in one PNG and the HTML report gives each its own figure.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np

from burnside.atomic import write_atomic
from burnside.compare import Comparison
from burnside.report.distribution import Histogram
from burnside.trace import parse_name

#: Exact zeros drawn on a log scale sit at this floor instead of vanishing.
_FLOOR = 1e-12
_HALF_ULP = 2.0**-24


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _integer_steps(axis) -> None:
    import matplotlib.ticker

    axis.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))


def loss_axis(axis, comparison: Comparison, reference_losses: dict[int, float] | None = None) -> None:
    """The loss before each step on both sides, and the float64 reference's when given."""
    for side in (comparison.a, comparison.b):
        steps = sorted(side.losses)
        axis.plot(steps, [side.losses[k] for k in steps], marker="o", label=side.name)
    if reference_losses:
        steps = sorted(reference_losses)
        axis.plot(steps, [reference_losses[k] for k in steps], color="black", linestyle=":", marker="x",
                  label="float64 reference")
    axis.set(title="loss before each step", xlabel="step", ylabel="loss")
    _integer_steps(axis)
    axis.legend(fontsize=8)


def per_stage(comparison: Comparison, measure: Callable) -> dict[str, dict[int, float]]:
    """stage -> step -> the largest ``measure(row)`` over that stage's rows (None values skipped)."""
    by_stage: dict[str, dict[int, float]] = {}
    for row in comparison.rows:
        parsed = parse_name(row.name)
        value = measure(row) if parsed is not None else None
        if value is None:
            continue
        cell = by_stage.setdefault(parsed.stage, {})
        cell[parsed.step] = max(cell.get(parsed.step, 0.0), float(value))
    return by_stage


def drift_axis(axis, comparison: Comparison, *, ulps: bool = False) -> None:
    """max |A - B| (or max ulps) per stage per step: rounding stays flat, a bug jumps or grows."""
    by_stage = per_stage(comparison, (lambda r: r.stats.max_ulps) if ulps else (lambda r: r.stats.max_abs))
    floor = 0.5 if ulps else _FLOOR
    for stage, per_step in by_stage.items():
        xs = sorted(per_step)
        axis.plot(xs, [max(per_step[x], floor) for x in xs], marker=".", label=stage)
    default = comparison.tolerances.default
    if not ulps and comparison.rows:
        axis.axhline(default.atol, color="black", linestyle="--", linewidth=0.8, label=f"tolerance {default.atol:g}")
    elif ulps and default.ulps is not None:
        axis.axhline(default.ulps, color="black", linestyle="--", linewidth=0.8, label=f"tolerance {default.ulps} ulps")
    axis.set_yscale("log")
    _integer_steps(axis)
    if ulps:
        axis.set(title="max ulps between A and B per step (0.5 = identical)", xlabel="step", ylabel="max ulps")
    else:
        axis.set(title=f"max |A - B| per step ({_FLOOR:g} = identical)", xlabel="step", ylabel="max |diff|")
    axis.legend(fontsize=7, ncol=2)


def reference_axis(axis, comparison: Comparison) -> None:
    """Each side's distance to the float64 reference per step, in half-ulps of the tensor's scale:
    noise stays flat, a bug grows."""
    judged = [r for r in comparison.rows if r.ref is not None and r.ref.scale > 0]
    for side in ("a", "b"):
        per_step: dict[int, float] = {}
        for row in judged:
            parsed = parse_name(row.name)
            if parsed is None:
                continue
            dist = row.ref.dist_a if side == "a" else row.ref.dist_b
            per_step[parsed.step] = max(per_step.get(parsed.step, 0.0), dist / (_HALF_ULP * row.ref.scale))
        xs = sorted(per_step)
        axis.plot(xs, [max(per_step[x], 0.1) for x in xs], marker=".", label=comparison.side_name(side))
    axis.set_yscale("log")
    _integer_steps(axis)
    axis.set(title="distance to the float64 reference per step", xlabel="step", ylabel="max |X - R| / (2^-24 max|R|)")
    axis.legend(fontsize=8)


def activations_axis(axis, comparison: Comparison, step: int) -> bool:
    """max |A - B| per layer output at ``step``, in execution order, out-of-tolerance layers in red,
    and each side's distance to the reference when judged. False when that step has no activations."""
    rows = [r for r in comparison.rows if (p := parse_name(r.name)) is not None
            and p.stage == "activations" and p.step == step]
    if not rows:
        return False
    labels = [parse_name(r.name).rest for r in rows]
    ys = np.arange(len(rows))
    axis.barh(ys, [max(r.stats.max_abs, _FLOOR) for r in rows], color=["tab:red" if not r.passed else "tab:blue"
                                                                     for r in rows], label="|A - B|")
    if any(r.ref is not None for r in rows):
        axis.plot([max(r.ref.dist_a, _FLOOR) if r.ref else np.nan for r in rows], ys, "o", color="tab:orange",
                  markersize=4, label="|A - R|")
        axis.plot([max(r.ref.dist_b, _FLOOR) if r.ref else np.nan for r in rows], ys, "x", color="black",
                  markersize=5, label="|B - R|")
    axis.axvline(comparison.tolerances.default.atol, color="black", linestyle="--", linewidth=0.8, label="tolerance")
    axis.set_yticks(ys, labels, fontsize=7)
    axis.invert_yaxis()  # the first layer on top, like the execution order reads
    axis.set_xscale("log")
    axis.set(title=f"layer outputs at step {step} (red: out of tolerance)", xlabel="max |diff|")
    axis.legend(fontsize=7)
    return True


def histogram_axis(axis, histogram: Histogram, tolerance: float) -> None:
    """How one tensor's element differences spread over orders of magnitude, with the tolerance."""
    edges, counts = histogram.trimmed()
    if counts.size:
        axis.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="tab:blue", edgecolor="white")
    if tolerance > 0:
        axis.axvline(np.log10(tolerance), color="black", linestyle="--", linewidth=0.8,
                     label=f"tolerance {tolerance:g}")
        axis.legend(fontsize=8)
    extra = []
    if histogram.zeros:
        extra.append(f"{histogram.zeros} identical")
    if histogram.nonfinite:
        extra.append(f"{histogram.nonfinite} non-finite on one side only")
    axis.set(title=f"{histogram.name}: |A - B| of {histogram.n} elements" + (f" ({', '.join(extra)})" if extra else ""),
             xlabel="log10 |A - B|", ylabel="elements")
    axis.title.set_fontsize(9)


def figure_png(draw: Callable, size: tuple[float, float], dpi: int = 100) -> bytes | None:
    """Draw one figure with ``draw(axis)`` and return it as PNG bytes (None when draw returns False)."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=size)
    try:
        if draw(axis) is False:
            return None
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi)
        return buffer.getvalue()
    finally:
        plt.close(fig)


def plot_drift(comparison: Comparison, path: Path, reference_losses: dict[int, float] | None = None) -> Path:
    """Loss per step on both sides, max|diff| per step and stage, and (with a reference) each side's
    distance to it per step, to a PNG."""
    plt = _pyplot()
    judged = any(r.ref is not None and r.ref.scale > 0 for r in comparison.rows)
    fig, axes = plt.subplots(1, 3 if judged else 2, figsize=(16 if judged else 11, 4))
    loss_axis(axes[0], comparison, reference_losses)
    drift_axis(axes[1], comparison)
    if judged:
        reference_axis(axes[2], comparison)
    fig.tight_layout()
    buffer = io.BytesIO()  # drawn first, so a full disk can say how many bytes the PNG needed
    try:
        fig.savefig(buffer, format="png", dpi=110)
    finally:
        plt.close(fig)
    return write_atomic(path, buffer.getvalue())

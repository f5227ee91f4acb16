"""Plots a person would rather see than read: loss curves and per-step drift."""

from __future__ import annotations

from pathlib import Path

from burnside.atomic import atomic_output
from burnside.compare import Comparison
from burnside.trace import parse_name


def _plot_reference(comparison: Comparison, judged: list, axis) -> None:
    """Each side's distance to the float64 reference per step: noise stays flat, a bug grows."""
    import matplotlib.ticker

    half_ulp = 2.0**-24
    for side, label in (("a", comparison.side_name("a")), ("b", comparison.side_name("b"))):
        per_step: dict[int, float] = {}
        for row in judged:
            parsed = parse_name(row.name)
            if parsed is None:
                continue
            dist = row.ref.dist_a if side == "a" else row.ref.dist_b
            per_step[parsed.step] = max(per_step.get(parsed.step, 0.0), dist / (half_ulp * row.ref.scale))
        xs = sorted(per_step)
        axis.plot(xs, [max(per_step[x], 0.1) for x in xs], marker=".", label=label)
    axis.set_yscale("log")
    axis.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axis.set(title="distance to the float64 reference per step", xlabel="step",
             ylabel="max |X - R| / (2^-24 max|R|)")
    axis.legend(fontsize=8)


def plot_drift(comparison: Comparison, path: Path) -> Path:
    """Loss per step on both sides, max|diff| per step and stage, and (with a reference) each side's
    distance to it per step, to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    judged = [r for r in comparison.rows if r.ref is not None and r.ref.scale > 0]
    fig, axes = plt.subplots(1, 3 if judged else 2, figsize=(16 if judged else 11, 4))
    left, right = axes[0], axes[1]
    for side in (comparison.a, comparison.b):
        steps = sorted(side.losses)
        left.plot(steps, [side.losses[k] for k in steps], marker="o", label=side.name)
    left.set(title="loss before each step", xlabel="step", ylabel="loss")
    left.legend(fontsize=8)
    by_stage: dict[str, dict[int, float]] = {}
    for row in comparison.rows:
        parsed = parse_name(row.name)
        if parsed is None:
            continue
        cell = by_stage.setdefault(parsed.stage, {})
        cell[parsed.step] = max(cell.get(parsed.step, 0.0), row.stats.max_abs)
    for stage, per_step in by_stage.items():
        xs = sorted(per_step)
        # log scale: show exact zeros at the floor instead of dropping them
        right.plot(xs, [max(per_step[x], 1e-12) for x in xs], marker=".", label=stage)
    if comparison.rows:
        default = comparison.tolerances.default
        right.axhline(default.atol, color="black", linestyle="--", linewidth=0.8, label=f"tolerance {default.atol:g}")
    right.set_yscale("log")
    for axis in (left, right):
        axis.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    right.set(title="max |A - B| per step (1e-12 = identical)", xlabel="step", ylabel="max |diff|")
    right.legend(fontsize=7, ncol=2)
    if judged:
        _plot_reference(comparison, judged, axes[2])
    fig.tight_layout()
    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)
    return path

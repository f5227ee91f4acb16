"""S1: train_step.py and crate train-step, one SGD step on each side, the same trace structure."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult, record_a1_pair

#: The seed's table: tensor -> element count.
SEED_COUNTS = {"logits": 12, "loss": 1, "grads.fc1.weight": 32, "grads.fc1.bias": 8, "grads.fc2.weight": 24,
               "grads.fc2.bias": 3, "params_after.fc1.weight": 32, "params_after.fc1.bias": 8,
               "params_after.fc2.weight": 24, "params_after.fc2.bias": 3, "loss_after": 1}
TOL = 1e-6


def run(ctx: Context) -> ExperimentResult:
    """Record one SGD step (lr 0.1) of A1 in PyTorch and in burn, and compare every number."""
    from burnside.compare import Tolerance, Tolerances

    comparison = record_a1_pair(ctx, "a1", tolerances=Tolerances(Tolerance(atol=TOL))).comparison
    rows = {row.name.removeprefix("step0."): row for row in comparison.rows}
    for name in SEED_COUNTS:
        row = rows.get(name)
        if row is not None:
            ctx.console.print(f"{name:<24} n={row.stats.n:>3}  max|diff|={row.stats.max_abs:.2e}")
    worst = max(row.stats.max_abs for row in comparison.rows)
    ctx.console.print(f"worst={worst:.2e} tol={TOL:g} {'OK' if comparison.passed else 'FAIL'}")
    counts = {name: rows[name].stats.n for name in SEED_COUNTS if name in rows}
    return ExperimentResult(
        claims=[
            ("both sides wrote the same tensors, with the page's element counts",
             counts == SEED_COUNTS and not comparison.only_in_a and not comparison.only_in_b
             and not comparison.structure),
            (f"every tensor within {TOL:g} of PyTorch (worst {worst:.2e})", comparison.passed and worst <= TOL),
        ],
    )


EXPERIMENT = Experiment("S1", "train-step: one SGD step on PyTorch and on burn", "000", ("torch", "burn"), run)

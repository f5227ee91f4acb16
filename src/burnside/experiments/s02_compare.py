"""S2: compare.py, the seed's table of every tensor of one A1 SGD step, PyTorch against burn."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult, record_a1_pair


def run(ctx: Context) -> ExperimentResult:
    """Both sides record one step; every tensor agrees within 1e-6 (the seed's worst: 1.19e-07)."""
    from burnside.report import render

    parity = record_a1_pair(ctx, "a1")
    comparison = parity.comparison
    render(comparison, parity.diagnoses, ctx.console)
    expected = {"step0.logits": 12, "step0.loss": 1, "step0.grads.fc1.weight": 32, "step0.grads.fc1.bias": 8,
                "step0.grads.fc2.weight": 24, "step0.grads.fc2.bias": 3, "step0.params_after.fc1.weight": 32,
                "step0.params_after.fc1.bias": 8, "step0.params_after.fc2.weight": 24,
                "step0.params_after.fc2.bias": 3, "step0.loss_after": 1}
    counts = {r.name: r.stats.n for r in comparison.rows if r.name in expected}
    return ExperimentResult(
        claims=[
            ("both traces hold the seed's tensors with the seed's sizes", counts == expected),
            ("inputs and initial params bit-identical", not comparison.start_mismatch),
            (f"every tensor within 1e-6 (worst {comparison.worst:.2e})", comparison.passed),
        ],
    )


EXPERIMENT = Experiment("S2", "compare.py: one A1 SGD step, every tensor, PyTorch vs burn", "000",
                        ("torch", "burn"), run)

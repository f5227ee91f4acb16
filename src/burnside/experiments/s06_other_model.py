"""S6: gradients paired with another model (same values, new ParamIds): silently nothing."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """`from_grads(.., &other)` finds no gradient; the step returns `other` unchanged; no panic."""
    from burnside.burn.programs import run_program

    moves = run_program("moves", console=ctx.console if ctx.progress else None)
    lines = [line for line in moves.text.splitlines() if "other" in line]
    ctx.console.print("\n".join(lines), markup=False)
    out = moves.json
    return ExperimentResult(
        claims=[
            ("from_grads(.., &other).len() = 0", out["other_grads_len"] == 0),
            ("other's fc2.bias unchanged by the step", out["other_fc2_bias_changed"] is False),
            ("no warning, no panic: the program exited cleanly", moves.stderr.strip() == ""),
        ],
    )


EXPERIMENT = Experiment("S6", "burn wrong-model pairing: from_grads with another model", "000", ("burn",), run)

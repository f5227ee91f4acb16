"""S14: pitb-opt `othergrads`, gradients paired with a re-initialised model of the same values."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """`GradientsParams::len() = 0` and the step changes nothing, silently."""
    from burnside.burn.programs import run_program

    run = run_program("othergrads", console=ctx.console if ctx.progress else None)
    ctx.console.print(run.text, markup=False)
    return ExperimentResult(
        claims=[
            ("GradientsParams::len() = 0", run.json["grads_len"] == 0),
            ("fc2.bias changed: false", run.json["fc2_bias_changed"] is False),
        ],
    )


EXPERIMENT = Experiment("S14", "pitb-opt othergrads: from_grads with another model", "001", ("burn",), run)

"""S11: pitb-opt `helper`, a `&mut Mlp` train_step passing `*model` to the step (E0507)."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """Moving out of `*model` behind `&mut`: rustc refuses and again suggests `.clone()`."""
    from burnside.burn.cargo import expect_compile_error

    error = expect_compile_error("pitb-opt", "helper", "helper", console=ctx.console if ctx.progress else None)
    ctx.console.print(error.rendered.rstrip(), markup=False, highlight=False)
    return ExperimentResult(
        claims=[
            (f"does not compile: {error.code} {error.message}", error.code == "E0507"),
            ("rustc suggests `.clone()`", error.suggests_clone),
        ],
    )


EXPERIMENT = Experiment("S11", "pitb-opt helper: E0507 behind &mut and the .clone() suggestion", "001", ("burn",), run)

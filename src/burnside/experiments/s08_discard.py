"""S8: train-one `discard`, the `.clone()` rustc suggested: compiles, no warning, nothing learned."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """`optim.step(0.1, model.clone(), grads);` drops the updated model; the loss does not move."""
    from burnside.burn.programs import built_programs, run_program

    console = ctx.console if ctx.progress else None
    warnings = built_programs(console).warnings("train-one-discard")
    run = run_program("train-one-discard", console=console)
    ctx.console.print(run.text, markup=False)
    before, after = run.json["bits"]
    return ExperimentResult(
        claims=[
            ("compiles without a warning", not warnings),
            ("loss before == loss after, bit for bit", before == after),
        ],
    )


EXPERIMENT = Experiment("S8", "train-one discard: the suggested .clone() compiles and drops the update", "000",
                        ("burn",), run)

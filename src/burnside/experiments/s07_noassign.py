"""S7: train-one bin `noassign`, the PyTorch-shaped step that rustc rejects (E0382)."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """`optim.step(0.1, model, grads);` then using `model`: borrow of moved value, and a bad hint."""
    from burnside.burn.cargo import expect_compile_error

    error = expect_compile_error("train-one", "noassign", "noassign", console=ctx.console if ctx.progress else None)
    ctx.console.print(error.rendered.rstrip(), markup=False, highlight=False)
    return ExperimentResult(
        claims=[
            (f"does not compile: {error.code} {error.message}", error.code == "E0382"),
            ("rustc suggests `.clone()`", error.suggests_clone),
        ],
    )


EXPERIMENT = Experiment("S7", "train-one noassign: E0382 and the .clone() suggestion", "000", ("burn",), run)

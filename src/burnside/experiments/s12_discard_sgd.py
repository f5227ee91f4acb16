"""S12: pitb-opt `discard sgd`, the clone version never learns; the fixed helper matches PyTorch."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult

TOL = 1.2e-7  # the page: "within 1.2e-7", one f32 ulp near 1


def run(ctx: Context) -> ExperimentResult:
    """Three SGD steps through `&mut Mlp`: dropped (`optim.step(.., model.clone(), ..);`) and fixed."""
    from burnside.examples.a1 import torch_losses
    from burnside.burn.programs import run_program

    run = run_program("discard", ["sgd"], console=ctx.console if ctx.progress else None)
    ctx.console.print(run.text, markup=False)
    torch = torch_losses(3, "sgd")
    ctx.console.print(f"PyTorch: losses {torch}")
    out = run.json
    diff = max(abs(a - b) for a, b in zip(out["fixed"], torch))
    return ExperimentResult(
        claims=[
            ("clone version: 3 losses bit-identical (no update landed)", len(set(out["clone_bits"])) == 1),
            ("fixed version: losses strictly decrease", all(a > b for a, b in zip(out["fixed"], out["fixed"][1:]))),
            (f"fixed version matches PyTorch within {TOL:g} (max diff {diff:.2e})", diff <= TOL),
        ],
    )


EXPERIMENT = Experiment("S12", "pitb-opt discard sgd: the clone version's loss never moves", "001",
                        ("burn", "torch"), run)

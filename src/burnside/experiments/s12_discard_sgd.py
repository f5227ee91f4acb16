"""S12: pitb-opt `discard sgd`, the clone version never learns; the fixed helper matches PyTorch."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult

TOL = 1.2e-7  # the page: "within 1.2e-7", one f32 ulp near 1


def torch_losses(optim: str, steps: int) -> list[float]:
    """The loss before each of ``steps`` PyTorch steps on A1 (the page's step_helper.py)."""
    import torch
    from torch import nn

    from burnside.a1 import a1_data, a1_model, a1_optimizer

    x, y = a1_data()
    model = a1_model()
    opt = a1_optimizer(model, optim)
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach().to(torch.float32)))
    return losses


def run(ctx: Context) -> ExperimentResult:
    """Three SGD steps through `&mut Mlp`: dropped (`optim.step(.., model.clone(), ..);`) and fixed."""
    from burnside.burn.programs import run_program

    run = run_program("discard", ["sgd"], console=ctx.console if ctx.progress else None)
    ctx.console.print(run.text, markup=False)
    torch = torch_losses("sgd", 3)
    ctx.console.print(f"PyTorch: losses {torch}")
    out = run.json
    diff = max(abs(a - b) for a, b in zip(out["fixed"], torch))
    return ExperimentResult(
        claims=[
            ("clone version: 3 losses bit-identical (no update landed)", len(set(out["clone_bits"])) == 1),
            ("fixed version: losses strictly decrease", all(a > b for a, b in zip(out["fixed"], out["fixed"][1:]))),
            (f"fixed version matches PyTorch within {TOL:g} (max diff {diff:.2e})", diff <= TOL),
        ],
        data=out | {"torch": torch},
    )


EXPERIMENT = Experiment("S12", "pitb-opt discard sgd: the clone version's loss never moves", "001",
                        ("burn", "torch"), run)

"""S10: step_helper.py, PyTorch's train_step(model, opt) helper over three SGD steps."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """A helper that returns nothing trains fine in PyTorch: opt.step() updates in place."""
    import torch
    from torch import nn

    from burnside.examples.a1 import SEED_SGD_LOSSES, SGD_LR, a1_data, a1_model

    x, y = a1_data()

    def train_step(model: nn.Module, opt: torch.optim.Optimizer) -> float:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    model = a1_model()
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR)
    losses = [train_step(model, opt) for _ in range(3)]
    ctx.console.print(f"losses {losses}")
    worst = max(abs(a - b) for a, b in zip(losses, SEED_SGD_LOSSES))
    return ExperimentResult(
        claims=[
            ("losses strictly decrease", all(a > b for a, b in zip(losses, losses[1:]))),
            (f"losses within 1e-6 of the page's {list(SEED_SGD_LOSSES)} (max diff {worst:.2e})", worst <= 1e-6),
        ],
    )


EXPERIMENT = Experiment("S10", "step_helper.py: a PyTorch train_step helper", "001", ("torch",), run)

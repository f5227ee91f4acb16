"""S5: one_moves.py, the PyTorch half of "where did the tensors go after one step"."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """In-place update: the alias sees new values, the clone keeps old ones; a deep copy is never updated."""
    import copy

    import torch
    from torch import nn

    from burnside.examples.a1 import SGD_LR, a1_data, a1_model

    out = ctx.console.print
    x, y = a1_data()
    model = a1_model()
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR)
    alias = model.fc2.bias
    snap = model.fc2.bias.detach().clone()
    ptr = model.fc2.bias.data_ptr()
    before = model.fc2.bias.tolist()
    out(f"fc2.bias before          {before}")
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    out(f"fc2.bias.grad            {model.fc2.bias.grad.tolist()}")
    opt.step()
    after = model.fc2.bias.tolist()
    same_object, same_buffer = alias is model.fc2.bias, ptr == model.fc2.bias.data_ptr()
    out(f"fc2.bias after step      {after}")
    out(f"alias taken before step  {alias.tolist()}")
    out(f"clone taken before step  {snap.tolist()}")
    out(f"same object, same buffer: {same_object} {same_buffer}")

    # The optimizer was built on `model`; training a deep copy leaves the copy untouched.
    other = copy.deepcopy(model)
    other_before = other.fc2.bias.detach().clone()
    opt.zero_grad()
    nn.functional.cross_entropy(other(x), y).backward()
    opt.step()
    changed = not torch.equal(other_before, other.fc2.bias.detach())
    has_grad = [p.grad is not None for p in model.parameters()]
    out(f"other fc2.bias changed by opt.step(): {changed}")
    out(f"model params have grad: {has_grad}")
    return ExperimentResult(
        claims=[
            ("the alias shows the new values", alias.tolist() == after and after != before),
            ("detach().clone() keeps the old values", snap.tolist() == before),
            ("same object and same data_ptr after step", same_object and same_buffer),
            ("a deep copy trained with model's optimizer is unchanged", not changed),
            ("the optimizer's own model has no grads", not any(has_grad)),
        ],
    )


EXPERIMENT = Experiment("S5", "one_moves.py: PyTorch updates parameters in place", "000", ("torch",), run)

"""D012 port trains parameters the PyTorch side keeps frozen.

## What it does
Finds steps where the port's optimizer received gradients for parameters the PyTorch side
has none for, while that step's logits and loss agree, and lists them (with whether the
PyTorch side left them unchanged).

## Why is this bad?
PyTorch freezes a parameter by `requires_grad_(False)`, by computing its module's output
under `torch.no_grad()`, or by `.detach()`ing it: no gradient, no update. A DQN's target
network, a frozen encoder or embedding, a teacher model are frozen this way. burn's
parameters require gradients by default and `GradientsParams::from_grads(.., &model)` keys
every one the loss reached, so a port that leaves out the freezing trains them: the
forward still agrees at the first step, and the frozen part moves from then on.

## Example
```rust
let next_q = model.target.forward(next_obs);            // PyTorch: with torch.no_grad()
let grads = GradientsParams::from_grads(loss.backward(), &model);
```

## Use instead
```rust
let next_q = model.target.forward(next_obs).detach();   // no gradient reaches the target
// or keep the target frozen for good: `let target = model.target.no_grad();`
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis, listed
from burnside.diagnose.rules.d008_parameter_unused import forward_differs, missing_grads
from burnside.rule import Severity

ID = "D012"
NAME = "trains-frozen-parameters"
TITLE = "port trains parameters the PyTorch side keeps frozen"
SEVERITY = Severity.ERROR


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis when the PyTorch side got fewer gradients than the port while the forward agrees."""
    found = []
    for side, torch_side, port in (("a", comparison.a, comparison.b), ("b", comparison.b, comparison.a)):
        if torch_side.framework != "pytorch" or port.framework == "pytorch":
            continue
        for k in sorted(torch_side.grads_len):
            mine, theirs = torch_side.grads_len[k], port.grads_len.get(k)
            if theirs is None or mine >= theirs or forward_differs(comparison, k) is not None:
                continue
            frozen = missing_grads(comparison, side, k)
            never = f": {torch_side.framework} has none for {listed(frozen, 6)}, so it never updates them"
            evidence = (f"{port.name}: gradients for {theirs} parameters at step {k}, {torch_side.framework} for "
                        f"{mine}" + (never if frozen else ""))
            found.append(Diagnosis(
                ID, TITLE, evidence,
                "freeze them in the port as the PyTorch model does: `.detach()` the frozen module's output (PyTorch's "
                "`torch.no_grad()` or `.detach()`), or `module.no_grad()` for parameters with "
                "`requires_grad_(False)`; then `GradientsParams::from_grads` has no gradient for them and the "
                "optimizer leaves them alone"))
            break
    return found

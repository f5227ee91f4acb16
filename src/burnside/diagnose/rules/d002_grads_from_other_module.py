"""D002 gradients matched to another module.

## What it does
Finds steps where the port's optimizer received gradients for fewer parameters than the
PyTorch side's (burn: `GradientsParams::len()` is 0 or short), while that step's logits
and loss agree (otherwise the forward differs: D008), and lists the parameters without one.
The PyTorch side short of gradients is the other way round: D012.

## Why is this bad?
`GradientsParams::from_grads(grads, &module)` looks up each of `module`'s parameters by
`ParamId`. Given a module that did not build the loss (a re-initialised copy, a model
rebuilt with `Param::from_tensor`), it finds nothing: `len() == 0`, and `step` returns
the module unchanged. No warning, no panic.

## Example
```rust
let other = a1_model(&device);
let loss = ce.forward(model.forward(x), y);
let grads = GradientsParams::from_grads(loss.backward(), &other);
```

## Use instead
```rust
let grads = GradientsParams::from_grads(loss.backward(), &model);
debug_assert_eq!(grads.len(), 4); // the number of parameter tensors being trained
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis, listed
from burnside.diagnose.gradients import forward_differs, missing_grads
from burnside.rule import Severity

ID = "D002"
NAME = "grads-from-other-module"
TITLE = "gradients matched to another module"
SEVERITY = Severity.ERROR
PRECEDENCE = 120  # gradients: before the update computed from them


def port_sides(comparison: Comparison) -> list[tuple[str, object, object]]:
    """(side, its summary, the other's) for each side that may be a port: not the PyTorch side when the
    other is one (the original's own loop is the definition of right), both sides otherwise."""
    frameworks = (comparison.a.framework, comparison.b.framework)
    sides = [("a", comparison.a, comparison.b), ("b", comparison.b, comparison.a)]
    if frameworks.count("pytorch") == 1:
        return [s for s in sides if s[1].framework != "pytorch"]
    return sides


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per port side that got fewer gradients than the other while the forward agrees."""
    found = []
    for side, summary, other in port_sides(comparison):
        short, none = [], []
        for k in sorted(summary.grads_len):
            mine, theirs = summary.grads_len[k], other.grads_len.get(k)
            if forward_differs(comparison, k) is not None:
                continue  # the forward itself differs: unused parameters (D008), not another module
            if mine is not None and theirs is not None and mine < theirs:
                short.append(f"step {k}: {mine} (vs {theirs})")
                if not none:
                    none = missing_grads(comparison, side, k)
        if not short:
            continue
        evidence = f"{summary.name}: gradients for fewer parameters than {other.framework}: " + "; ".join(short)
        if none:
            evidence += f" (none for {listed(none, 6)})"
        fix = ("pass the module whose forward built the loss: `GradientsParams::from_grads(loss.backward(), &model)`, "
               "and assert `debug_assert_eq!(grads.len(), N)` with N the number of parameter tensors")
        if all(n != 0 for n in summary.grads_len.values()):
            # some gradients arrived: another module is one cause, a cut in the graph the other
            fix += ("; if that is the module, the loss does not reach those parameters in the port's forward: a "
                    "`detach()` the PyTorch model does not have, or parameters frozen with `no_grad()` / "
                    "`set_require_grad(false)` that PyTorch trains")
        found.append(Diagnosis(ID, TITLE, evidence, fix))
    return found

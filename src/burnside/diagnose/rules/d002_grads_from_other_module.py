"""D002 gradients matched to another module.

## What it does
Finds steps where one side's optimizer received gradients for fewer parameters than
the other side's (burn: `GradientsParams::len()` is 0 or short), while that step's logits
and loss agree (otherwise the forward differs: D008).

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
from burnside.diagnose.diagnosis import Diagnosis
from burnside.diagnose.rules.d008_parameter_unused import forward_differs
from burnside.rule import Severity

ID = "D002"
NAME = "grads-from-other-module"
TITLE = "gradients matched to another module"
SEVERITY = Severity.ERROR


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per side that got fewer gradients than the other."""
    found = []
    for side, other in ((comparison.a, comparison.b), (comparison.b, comparison.a)):
        short = []
        for k in sorted(side.grads_len):
            mine, theirs = side.grads_len[k], other.grads_len.get(k)
            if forward_differs(comparison, k) is not None:
                continue  # the forward itself differs: unused parameters (D008), not another module
            if mine is not None and theirs is not None and mine < theirs:
                short.append(f"step {k}: {mine} (vs {theirs})")
        if short:
            found.append(Diagnosis(
                ID, TITLE,
                f"{side.name}: gradients for fewer parameters than {other.framework}: "
                + "; ".join(short),
                "pass the module whose forward built the loss: "
                "`GradientsParams::from_grads(loss.backward(), &model)`, and assert "
                "`debug_assert_eq!(grads.len(), N)` with N the number of parameter tensors",
            ))
    return found

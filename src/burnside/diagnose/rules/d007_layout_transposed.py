"""D007 tensor stored in the other framework's layout.

## What it does
Finds tensors whose shape on one side is the transpose of the other's.

## Why is this bad?
burn's `Linear` weight is `[d_input, d_output]`; PyTorch's is `[out, in]`. A trace
must hold PyTorch layout (docs/trace-format.md); a recorder that writes burn's layout
makes every weight, gradient and optimizer moment of a `Linear` look wrong. burnside
never transposes silently: a square weight would compare "fine" against its transpose.

## Example
```rust
tensors.insert("step0.grads.fc1.weight", grad_fc1_weight); // [in, out]
```

## Use instead
```rust
tensors.insert("step0.grads.fc1.weight", grad_fc1_weight.transpose()); // [out, in]
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D007"
NAME = "layout-transposed"
TITLE = "tensor stored in the other framework's layout"
SEVERITY = Severity.ERROR
PRECEDENCE = 40  # a layout: before the forward that reads the tensor


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis naming the transposed tensors."""
    transposed = [p for p in comparison.structure if p.transposed]
    if not transposed:
        return []
    names = ", ".join(f"{comparison.display_name(p.name)} (A {p.a}, B {p.b})" for p in transposed)
    return [Diagnosis(
        ID, TITLE, names,
        "write Linear weights, their gradients and optimizer moments transposed to PyTorch's [out, in] "
        "(the burnside-trace recorder does this)",
    )]

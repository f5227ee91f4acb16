"""D006 inputs or initial parameters not bit-identical.

## What it does
Finds inputs (`step{k}.inputs.*`) and initial parameters (`step0.params_before.*`)
that differ between the sides by even one bit.

## Why is this bad?
The comparison of outputs is only a measure of the computation when both sides start
from the same bits. Computing inputs in f32 on one side (`0.1 * k as f32 - 0.5`) and
in f64 on the other makes 7 of A1's 16 inputs differ by 1-3 ulps, and every output
then measures that difference too; a small error can hide inside it.

## Example
```rust
let x: Vec<f32> = (0..16).map(|k| 0.1 * k as f32 - 0.5).collect();
```

## Use instead
```rust
let x: Vec<f32> = (0..16).map(|k| (0.1 * k as f64 - 0.5) as f32).collect();
// or load the PyTorch side's init file with burnside-trace
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D006"
NAME = "inputs-not-identical"
TITLE = "inputs or initial parameters not bit-identical"
SEVERITY = Severity.ERROR


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis listing the shared-start tensors that differ."""
    rows = comparison.start_mismatch
    if not rows:
        return []
    parts = [f"{comparison.display_name(r.name)}: {r.stats.differing} of {r.stats.n} differ{_how(r.stats)}"
             for r in rows]
    return [Diagnosis(
        ID, TITLE, "; ".join(parts),
        "compute inputs and weights in f64 and round to f32 once on both sides, or load the PyTorch "
        "side's init file (`burnside.torch.export_init`) with burnside-trace",
    )]


def _how(stats) -> str:
    if stats.max_ulps is None:  # integer tensors (labels): any difference is a different value
        return f" (max|diff|={stats.max_abs:g})"
    if stats.max_ulps == 0:
        return " only in the sign of zero (-0.0 against +0.0)"
    return f", up to {stats.max_ulps} ulps"

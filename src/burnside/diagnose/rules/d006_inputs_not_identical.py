"""D006 inputs or initial parameters not bit-identical.

## What it does
Finds inputs (`step{k}.inputs.*`) and initial parameters (`step0.params_before.*`)
that differ between the sides by even one bit. Where one side fed a different batch at
step k and the other fed step 0's batch again (a port that reads the init file's first
batch once while the PyTorch loop draws one per step), it says so and names the reader of
step k's batch, `InitFile::float_input_at(k, ..)`.

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
from burnside.forensics import RepeatedBatch, evidence_of
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D006"
NAME = "inputs-not-identical"
TITLE = "inputs or initial parameters not bit-identical"
SEVERITY = Severity.ERROR
PRECEDENCE = 10  # what both sides start from: before anything computed from it


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis listing the shared-start tensors that differ."""
    loaded = comparison.loading_names  # a forward trace's parameters and buffers: D014 names their fault
    rows = [r for r in comparison.start_mismatch if r.name not in loaded]
    if not rows:
        return []
    parts = [f"{comparison.display_name(r.name)}: {r.stats.differing} of {r.stats.n} differ{_how(r.stats)}"
             for r in rows]
    repeated = evidence_of(comparison).repeated_batch
    if repeated is not None:
        return [_repeated(comparison, repeated, parts)]
    other = [r for r in rows if _other_values(r)]
    if other:
        return [_other(comparison, other, parts)]
    return [Diagnosis(
        ID, TITLE, "; ".join(parts),
        "compute inputs and weights in f64 and round to f32 once on both sides, or load the PyTorch "
        "side's init file (`burnside.torch.export_init`) with burnside-trace",
    )]


def _repeated(comparison: Comparison, repeated: RepeatedBatch, parts: list[str]) -> Diagnosis:
    """D006 for a side that trained on step 0's batch again where the other fed a new batch."""
    feeder = "a" if repeated.side == "b" else "b"
    fed, repeater = (comparison.a, comparison.b) if feeder == "a" else (comparison.b, comparison.a)
    # "the PyTorch trace" only where it names one side: two PyTorch traces are told apart as A and B
    mixed = fed.framework == "pytorch" and repeater.framework != "pytorch"
    feeder_name = "the PyTorch trace" if mixed else comparison.side_name(feeder)
    at = _steps(repeated.steps)
    evidence = (f"{feeder_name} feeds a different batch at {at}; {comparison.side_name(repeated.side)} "
                f"fed step 0's batch again there: " + "; ".join(parts))
    k = repeated.steps[0]
    if repeater.framework == "burn":
        row = next(r for r in comparison.start_mismatch if r.name.startswith(f"step{k}.inputs."))
        name = row.name.removeprefix(f"step{k}.inputs.")
        reader = "int_input_at" if row.dtype == "I64" else "float_input_at"
        fix = (f"read each step's batch inside the step loop with InitFile::{reader}(step, ..): for step {k}, "
               f"`init.{reader}::<{len(row.shape)}>({k}, \"{name}\", &device)?`; the init file of "
               "`burnside check` holds every step's batch (`step{k}.inputs.{name}`), and "
               "`burnside.torch.export_init(model, batches, path)` writes them from the list of batches")
    else:
        fix = (f"feed {comparison.side_name(repeated.side)} the batch of each step, as {feeder_name} does "
               f"(step {k}'s is `step{k}.inputs.*` in {feeder_name})")
    return Diagnosis(ID, TITLE, evidence, fix)


#: An element this many ulps apart or more is another number, not a rounding of the same one (rounding in f32
#: against f64 is 1-3 ulps apart).
_OTHER_ULPS = 1 << 16


def _other_values(row) -> bool:
    """Whether a start tensor holds other numbers on the two sides, not roundings of the same: most elements
    differ, by more than any rounding."""
    return (row.stats.max_ulps is not None and row.stats.max_ulps >= _OTHER_ULPS
            and row.stats.differing * 2 > row.stats.n)


def _other(comparison: Comparison, rows: list, parts: list[str]) -> Diagnosis:
    """D006 for a start tensor the port computed or drew itself (a VAE's noise from burn's RNG, weights from its
    own initializer) where PyTorch's values are in the init file."""
    port = "b" if comparison.b.framework == "burn" or comparison.a.framework == "pytorch" else "a"
    who = comparison.side_name(port)
    inputs = [r for r in rows if r.name.split(".", 2)[1] == "inputs"]
    evidence = (f"{who} fed other numbers, not a rounding of the same ones (most elements apart by more than "
                f"{_OTHER_ULPS} ulps): it drew or computed them itself; " + "; ".join(parts))
    fixes = []
    if inputs:
        row = inputs[0]
        name = row.name.split(".", 2)[2]
        reader = "int_input" if row.dtype == "I64" else "float_input"
        fixes.append(f"read the batch's `{name}` instead of drawing or computing it: `step.{reader}::<{len(row.shape)}>"
                     f"(\"{name}\")?` (call by call, `init.{reader}_at::<{len(row.shape)}>(k, \"{name}\", &device)?`): "
                     "noise PyTorch draws in its loop (a VAE's eps, a dropout or augmentation input) is part of the "
                     "batch `record` saves, and the port must consume the same numbers")
    if len(inputs) < len(rows):
        fixes.append("load the initial parameters from the init file (`init.load_module(Model::new(&device))?`) "
                     "instead of the port's own initializer")
    return Diagnosis(ID, TITLE, evidence, "; ".join(fixes))


def _steps(steps: tuple[int, ...]) -> str:
    """`step 1`, `steps 1 and 3`, `steps 1 to 4`."""
    if len(steps) == 1:
        return f"step {steps[0]}"
    if len(steps) > 2 and steps == tuple(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]} to {steps[-1]}"
    return "steps " + ", ".join(map(str, steps[:-1])) + f" and {steps[-1]}"


def _how(stats) -> str:
    if stats.max_ulps is None:  # integer tensors (labels): any difference is a different value
        return f" (max|diff|={stats.max_abs:g})"
    if stats.max_ulps == 0:
        return " only in the sign of zero (-0.0 against +0.0)"
    return f", up to {stats.max_ulps} ulps"

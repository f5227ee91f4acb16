r"""D014 weights not loaded as in the checkpoint.

## What it does
In a comparison of two forward traces, names each parameter (`step0.params_before.*`) and
buffer (`step0.buffers.*`) the port does not hold as PyTorch's model does, with its fault:
transposed (B holds A's values with the axes swapped), gates in another order (a GRU's
[3H, ...] r,z,n or an LSTM's [4H, ...] i,f,g,o weight whose row blocks are A's, permuted;
the order found is named), running statistics fresh (a BatchNorm's running_mean all 0 /
running_var all 1 where A's are not), another tensor of the checkpoint loaded (B's `query`
holds the checkpoint's `key`, bit for bit: a loader's name mapping that sends one tensor where
another belongs), not loaded (values unrelated to the checkpoint's: a
constant or a fresh initialisation), dtype narrowed (a narrower dtype, or A's values rounded
to f16/bf16), a tensor only in A (nothing in the port holds it) or only in B. A correct load
is bit-identical, and gives no D014. The port's tensors are named after the checkpoint tensor
they hold (`burnside.compare.aligned`): enum variants, renamed fields, a `KeyRemapper` and burn's
packed attention against separate projections are no fault; only a name that contradicts the
bytes (a `query` holding the `key` beside it) is one. In a comparison of training traces, an initial parameter
(`step0.params_before.*`) whose gate or q,k,v row blocks are A's in another order is named the
same way (a port that cut the init file's stacked tensor wrongly), instead of D006.

## Why is this bad?
An inference port is the PyTorch model's forward with the checkpoint's weights. A weight the
port holds otherwise makes every layer after it differ, and the first diverging layer then
points at a layer whose code is right. burn-store's `PytorchStore` loads by name: a tensor
whose name it cannot match is skipped (with `allow_partial(true)`, silently), and the layer
keeps its fresh initialisation.

## Example
```rust
let mut store = PytorchStore::from_file("model.pt").allow_partial(true);
model.load_from(&mut store)?; // `head.weight` is `classifier.weight` in the checkpoint: skipped
```

## Use instead
```rust
let mut store = PytorchStore::from_file("model.pt")
    .with_key_remapping(r"^classifier\.", "head."); // the port's names for PyTorch's
model.load_from(&mut store)?; // and no allow_partial: a tensor it cannot match is an error
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D014"
NAME = "weights-not-loaded"
TITLE = "weights not loaded as in the checkpoint"
SEVERITY = Severity.ERROR
PRECEDENCE = 20  # the checkpoint as loaded: before what a forward computes from it

#: What each fault is called in the evidence, in the order they are reported.
_FAULTS = {
    "only_in_a": "only in A",
    "only_in_b": "only in B",
    "shape": "another shape",
    "transposed": "transposed",
    "gate_order": "gates in another order",
    "other_tensor": "another tensor of the checkpoint loaded",
    "fresh_stats": "running statistics fresh",
    "not_loaded": "not loaded",
    "dtype_narrowed": "dtype narrowed",
    "altered": "changed after loading",
}

#: Tensors listed per fault before the rest are counted (`--json` has them all under `loading`).
_LISTED = 8


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per kind of fault the loading check found, each tensor named with its evidence."""
    found = []
    for kind, words in _FAULTS.items():
        faults = [f for f in comparison.loading if f.kind == kind]
        if not faults:
            continue
        listed = "; ".join(f"{f.tensor}: {f.evidence}" for f in faults[:_LISTED])
        if len(faults) > _LISTED:
            listed += f"; and {len(faults) - _LISTED} more (`--json` lists them all under loading)"
        fixes = list(dict.fromkeys(f.fix for f in faults))
        fix = fixes[0] if len(fixes) == 1 else "; ".join(f"{f.tensor}: {f.fix}" for f in faults[:_LISTED])
        found.append(Diagnosis(ID, TITLE, f"{words}: {listed}", fix))
    return found

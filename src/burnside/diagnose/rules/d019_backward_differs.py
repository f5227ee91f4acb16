"""D019 gradients differ from an agreeing forward pass.

## What it does
Finds a step whose forward pass agrees on both sides (every recorded layer input and output, the
logits and the loss within tolerance or rounding, from the same parameters and batch) while its
gradients do not: the backward pass computes otherwise. It names the first gradient that differs,
how many do, and the known backward differences of burn's twins of the layers the model uses
(`burnside conformance` measured them: an activation's gradient at its kink, an `Embedding`'s
padding row, a distance's gradient at zero). It is reported only when no other rule names the
divergence.

## Why is this bad?
Two ports can agree on every forward value and still train apart: the first optimizer step moves
the parameters by different gradients, and every later step starts elsewhere. The usual causes are
a function whose derivative is a convention at a point real data hits (ReLU6's and Hardtanh's
bounds, LeakyReLU's and PReLU's zero: exact zeros are common after a ReLU or in padding), an option
the burn layer does not have (`padding_idx`, whose row PyTorch never trains), a `detach()` or a
tensor rebuilt from data in the port's forward, or a custom backward.

## Example
```rust
let h = relu(self.fc1.forward(x));          // exact zeros
let h = self.act.forward(h);                // burn's Relu6: clamp(0, 6), gradient 1 at 0 and 6
```

## Use instead
```rust
let h = relu(self.fc1.forward(x));
// PyTorch's nn.ReLU6 passes no gradient at 0 and 6: mask it where the input sits on a bound,
// e.g. h.clone().clamp(0.0, 6.0) * (h.clone().greater_elem(0.0) * h.lower_elem(6.0)).float() + ...
let h = self.act.forward(h);
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis, listed
from burnside.rule import Severity
from burnside.trace import parse_name

ID = "D019"
NAME = "backward-differs"
TITLE = "gradients differ from an agreeing forward pass"
SEVERITY = Severity.ERROR
PRECEDENCE = 200  # the backward alone, with an agreeing forward: after the named causes
#: a generic symptom: dropped when another rule names the divergence
ONLY_ALONE = True

_FORWARD = ("layer_inputs", "activations", "logits", "loss_inputs", "loss")


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis when the first divergence is a gradient and the forward pass of its step agrees."""
    first = comparison.first_divergence
    parsed = parse_name(first.name) if first is not None else None
    if parsed is None or parsed.stage != "grads" or comparison.start_mismatch or comparison.forward:
        return []
    k = parsed.step
    if comparison.a.grads_len.get(k) != comparison.b.grads_len.get(k):
        return []  # a parameter without a gradient on one side: D008
    rows = [(r, parse_name(r.name)) for r in comparison.rows]
    forward = [r for r, p in rows if p is not None and p.step == k and p.stage in _FORWARD]
    if not forward or not all(r.passed for r in forward):
        return []
    grads = [r for r, p in rows if p is not None and p.step == k and p.stage == "grads"]
    off = [parse_name(r.name).rest for r in grads if not r.passed]
    layers = sum(1 for r in forward if parse_name(r.name).stage == "activations")
    where = f"{layers} layer output{'s' if layers != 1 else ''}, " if layers else ""
    stats = first.stats
    nan = f", {stats.nan_one_side} NaN on one side only" if stats.nan_one_side else ""
    evidence = (f"step {k}: the forward pass agrees ({where}the logits and the loss within tolerance), "
                "but the gradient "
                f"of `{parsed.rest}` differs (max abs err {stats.max_abs:.3g}{nan}); {len(off)} of {len(grads)} "
                f"gradients differ ({listed(off, 4)})")
    fix = ("the backward pass differs where the values agree: look for a function whose derivative is a convention at "
           "a point the data hits (an activation's kink, an exact zero), an option burn's layer lacks (padding_idx), "
           "or a detach()/a tensor rebuilt from data in the port's forward")
    known = _known_backward(comparison)
    if known:
        fix += "; known backward differences of burn's twins of this model's layers (burnside conformance): " + known
    return [Diagnosis(ID, TITLE, evidence, fix)]


def _known_backward(comparison: Comparison) -> str:
    """The catalogue's backward differences for the classes the PyTorch side's model uses (or "")."""
    from burnside.catalogue import CATALOGUE, known_for

    modules = comparison.a.metadata.get("modules")
    names = [v for v in modules.values() if isinstance(v, str)] if isinstance(modules, dict) else []
    names.append(comparison.a.metadata.get("loss_fn"))
    found = {k for name in names if isinstance(name, str) for k in known_for(name) if k.backward}
    known = [k for k in CATALOGUE if k in found]  # in the catalogue's order
    return "; ".join(f"{k.case}: {k.cause}" + (f" (fix: {k.fix})" if k.fix else "") for k in known)

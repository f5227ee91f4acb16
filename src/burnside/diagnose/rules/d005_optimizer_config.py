"""D005 optimizer configuration differs between the sides.

## What it does
Compares the two traces' optimizer configurations key by key (name, lr, betas,
momentum, dampening, nesterov, weight decay and its kind, gradient clipping by norm),
apart from Adam's epsilon (D004).

## Why is this bad?
Defaults differ between the frameworks: burn's `MomentumConfig` has dampening 0.1
(PyTorch 0); burn's `Adam` weight decay is L2 on the gradient like `torch.optim.Adam`,
while `AdamW` decouples it. A port that relies on defaults trains a different
optimizer and drifts from the first step.

## Example
```rust
let optim = SgdConfig::new().with_momentum(Some(MomentumConfig::new().with_momentum(0.9))).init();
```

## Use instead
```rust
let momentum = MomentumConfig::new().with_momentum(0.9).with_dampening(0.0).with_nesterov(false);
let optim = SgdConfig::new().with_momentum(Some(momentum)).init();
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis, number
from burnside.rule import Severity

ID = "D005"
NAME = "optimizer-config"
TITLE = "optimizer configuration differs"
SEVERITY = Severity.ERROR
_KEYS = ("name", "lr", "betas", "momentum", "dampening", "nesterov", "weight_decay", "weight_decay_kind", "amsgrad",
         "clip_grad_norm")
_FIXES = {
    "dampening": "set `MomentumConfig::with_dampening(...)` explicitly (burn's default is 0.1, PyTorch's 0)",
    "weight_decay_kind": "use burn's `AdamW` for `torch.optim.AdamW` (decoupled) and `Adam` for L2 decay",
    "lr": "pass the same learning rate to `optim.step(lr, ...)`",
    "clip_grad_norm": ("clip all gradients by their joint norm as `clip_grad_norm_` does, and declare it: "
                       "`let clip = ClipGradNorm::new(MAX_NORM);` "
                       "`TraceRecorder::new(spec).with_clip_grad_norm(clip)`, "
                       "`let grads = clip.apply(&model, grads);` before `optim.step` (burn's "
                       "`GradientClippingConfig::Norm` clips each tensor by its own norm)"),
}


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis listing every differing key, when the traces describe their optimizers."""
    a, b = comparison.a.optimizer, comparison.b.optimizer
    if not a or not b:
        return []
    # a trace says clip_grad_norm only when its loop clips: absent is "none", not unknown
    optional = ("clip_grad_norm",)
    differing = [k for k in _KEYS if ((k in a and k in b) or k in optional) and _norm(a.get(k)) != _norm(b.get(k))]
    if not differing:
        return []
    shown = lambda v: "none" if v is None else repr(v)  # noqa: E731
    evidence = "; ".join(f"{k}: {comparison.a.framework} {shown(a.get(k))}, {comparison.b.framework} {shown(b.get(k))}"
                         for k in differing)
    fixes = [_FIXES[k] for k in differing if k in _FIXES] or ["configure the burn optimizer like the PyTorch one"]
    return [Diagnosis(ID, TITLE, evidence, "; ".join(fixes))]


def _norm(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    return number(value) if number(value) is not None else repr(value)

"""D005 optimizer configuration differs between the sides.

## What it does
Compares the two traces' optimizer configurations key by key (name, lr, betas,
momentum, dampening, nesterov, weight decay and its kind, gradient clipping by norm, the
learning rate of each step under a schedule),
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
from burnside.compare.config import differing_keys, group_differences, same
from burnside.diagnose.diagnosis import Diagnosis, listed
from burnside.rule import Severity

ID = "D005"
NAME = "optimizer-config"
TITLE = "optimizer configuration differs"
SEVERITY = Severity.ERROR
#: Each fix names the `Training` form first (what `burnside new` and the README teach), then the
#: same for a loop written call by call with `TraceRecorder`.
_FIXES = {
    "dampening": ("build SGD with momentum as PyTorch's: `OptimizerSpec::sgd(lr).with_momentum(m)` (dampening 0); "
                  "a burn optimizer built by hand needs `MomentumConfig::with_dampening(0.0)` explicitly (burn's "
                  "default is 0.1, PyTorch's 0)"),
    "weight_decay_kind": ("`OptimizerSpec::adamw` (burn's `AdamW`) for `torch.optim.AdamW` (decoupled), "
                          "`OptimizerSpec::adam` (burn's `Adam`) for L2 decay"),
    "lr": ("give the PyTorch loop's rate: `Training::new(OptimizerSpec::...(lr))`; call by call, pass it to "
           "`optim.step(lr, ...)`"),
    "lr_per_step": ("apply the PyTorch loop's learning-rate schedule: `Training::with_lr_schedule(|step| lr)`; call "
                    "by call, pass each step's rate to `optim.step(lr, ...)` and record it with "
                    "`recorder.lr(step, lr)` (a port that applies it already lacks only that line)"),
    "clip_grad_norm": ("clip all gradients by their joint norm as `clip_grad_norm_` does: "
                       "`Training::with_clip_grad_norm(MAX_NORM)`; call by call, "
                       "`let clip = ClipGradNorm::new(MAX_NORM);` declared with "
                       "`TraceRecorder::new(spec).with_clip_grad_norm(clip)` and "
                       "`let grads = clip.apply(&model, grads);` before `optim.step` (burn's "
                       "`GradientClippingConfig::Norm` clips each tensor by its own norm)"),
}


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis listing every differing key, when the traces describe their optimizers.

    The comparison fails on the same differences (`Comparison.optimizer_differences`), even where the recorded
    steps do not show them yet: a correct port declares the optimizer PyTorch's loop has."""
    a, b = comparison.a.optimizer, comparison.b.optimizer
    if not a or not b:
        return []
    differing = differing_keys(a, b)
    parts = [_differs(k, a.get(k), b.get(k), comparison.a.framework, comparison.b.framework) for k in differing]
    fixes = [_FIXES[k] for k in differing if k in _FIXES]
    grouped = group_differences(a, b, comparison.a.metadata.get("params") or [], comparison.b.metadata.get("params") or [])
    if grouped:
        parts += [f"{key} of {len(params)} parameter(s) by their group ({listed(params, 4)}): "
                  f"{comparison.a.framework} {x!r}, {comparison.b.framework} {y!r}"
                  for key, (params, x, y) in grouped.items()]
        fixes.append("declare each PyTorch parameter group with its settings: "
                     "`Training::with_group(OptimizerSpec::...(...), &[\"name\", ...])`; call by call, step each "
                     "group with its own burn optimizer configured like it on its part of the gradients "
                     "(`GradientsParams::from_params(&mut grads, &model, &ids)`) and declare it on the recorder "
                     "(`TraceRecorder::with_group(spec, &names)`)")
    if not parts:
        return []
    return [Diagnosis(ID, TITLE, "; ".join(parts),
                      "; ".join(fixes) or "configure the burn optimizer like the PyTorch one")]


def _same(a: object, b: object) -> bool:
    return same(a, b)


def _differs(key: str, a: object, b: object, name_a: str, name_b: str) -> str:
    shown = lambda v: "none" if v is None else repr(v)  # noqa: E731
    if key == "lr_per_step" and isinstance(a, list) and isinstance(b, list):
        k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if not _same(x, y)), min(len(a), len(b)))
        at = (f"step {k}: {name_a} {a[k]!r}, {name_b} {b[k]!r}" if k < min(len(a), len(b))
              else f"{name_a} {len(a)} steps, {name_b} {len(b)}")
        return f"{key}: first differs at {at}"
    if key == "lr_per_step":
        listed = a if isinstance(a, list) else b
        head = ", ".join(f"{x:g}" for x in listed[:4]) + (", ..." if len(listed) > 4 else "")
        return (f"{key}: {name_a} {'[' + head + ']' if listed is a else 'none'}, "
                f"{name_b} {'[' + head + ']' if listed is b else 'none'}")
    return f"{key}: {name_a} {shown(a)}, {name_b} {shown(b)}"

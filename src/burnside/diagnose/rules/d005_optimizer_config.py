"""D005 optimizer configuration differs between the sides.

## What it does
Compares the two traces' optimizer configurations key by key (name, lr, betas,
momentum, dampening, nesterov, weight decay and its kind, RMSprop's alpha, eps and centered,
Adagrad's lr_decay, eps and initial_accumulator_value, gradient clipping by norm, the
learning rate of each step under a schedule), each parameter group's too,
apart from Adam's epsilon (D004).

## Why is this bad?
Defaults differ between the frameworks: burn's `MomentumConfig` has dampening 0.1
(PyTorch 0); burn's `Adam` weight decay is L2 on the gradient like `torch.optim.Adam`,
while `AdamW` decouples it; `RmsPropConfig::new()` has momentum 0.9 and epsilon 1e-5
(`torch.optim.RMSprop` 0 and 1e-8), `AdaGradConfig::new()` epsilon 1e-5 (`torch.optim.Adagrad`
1e-10). A port that relies on defaults trains a different optimizer and drifts from the first step.

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
from burnside.optimizers.settings import differing_keys, group_differences, known_optimizer, same
from burnside.diagnose.diagnosis import Diagnosis, listed
from burnside.optimizers import OPTIMIZERS
from burnside.rule import Severity

ID = "D005"
NAME = "optimizer-config"
TITLE = "optimizer configuration differs"
SEVERITY = Severity.ERROR
PRECEDENCE = 180  # declared settings: before the update difference they explain (D009)
CATALOGUE = "declared optimizer"  # its fix gains burn's known differences of the optimizer the port declares
#: Each fix names the `Training` form first (what `burnside new` and the README teach), then the
#: same for a loop written call by call with `TraceRecorder`.
_FIXES = {
    "weight_decay_kind": ("`OptimizerSpec::adamw` (burn's `AdamW`) for `torch.optim.AdamW` (decoupled), "
                          "`OptimizerSpec::adam` (burn's `Adam`) for L2 decay"),
    "weight_decay": ("give PyTorch's weight decay: `OptimizerSpec::...(lr).with_weight_decay(wd)` (L2 on the gradient "
                     "for SGD, Adam, RMSprop and Adagrad, decoupled for AdamW); burn's `AdamWConfig::new()` decays by "
                     "1e-4 unless told otherwise (`with_weight_decay`)"),
    "momentum": ("give PyTorch's momentum: `OptimizerSpec::sgd(lr).with_momentum(m)` or `OptimizerSpec::rmsprop(lr)"
                 ".with_momentum(m)`; a burn RMSprop built by hand, `RmsPropConfig::with_momentum(m)` (burn's default "
                 "is 0.9, PyTorch's 0)"),
    "nesterov": ("give SGD PyTorch's `nesterov=`: `OptimizerSpec::sgd(lr).with_momentum(m).with_nesterov(..)`; a burn "
                 "optimizer built by hand, `MomentumConfig::with_nesterov(..)` (burn's default is false)"),
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
    if not a or not b or not known_optimizer(a) or not known_optimizer(b):
        return []  # an optimizer burnside does not know is not judged as another (`optimizer_notes`)
    differing = differing_keys(a, b)
    parts = [_differs(k, a.get(k), b.get(k), comparison.a.framework, comparison.b.framework) for k in differing]
    fixes = [fix for k in differing if (fix := _fix(k, b.get("name"))) is not None]
    if "lr_per_step" in differing and _factor_for_rate(a, b):
        parts[differing.index("lr_per_step")] += (", each step's burn rate the PyTorch rate divided by its base "
                                                  f"rate {a.get('lr')!r}: the schedule's factor, not the rate")
        factor_fix = ("return the rate from the schedule, not LambdaLR's factor: `Training::with_lr_schedule(|step| "
                      "base_lr * factor(step))` (call by call, `optim.step(base_lr * factor(k), ...)` and "
                      "`recorder.lr(k, ...)` alike)")
        fixes = [factor_fix if f == _FIXES["lr_per_step"] else f for f in fixes]
        if factor_fix not in fixes:
            fixes.append(factor_fix)
    offset = _schedule_offset(a, b) if "lr_per_step" in differing else None
    if offset is not None:
        name_a, name_b = comparison.a.framework, comparison.b.framework
        parts[differing.index("lr_per_step")] += (
            f", each step k's {name_b} rate {name_a}'s rate at step k {'+' if offset > 0 else '-'} {abs(offset)}: "
            f"the same schedule, counted {abs(offset)} step{'s' if abs(offset) > 1 else ''} "
            f"{'ahead' if offset > 0 else 'behind'}")
        offset_fix = (f"evaluate the schedule at the step PyTorch's does: step k (from 0) takes the rate `LambdaLR` "
                      f"gives at step k, `base_lr * lr_lambda(k)`; the port gives step k the rate of step k "
                      f"{'+' if offset > 0 else '-'} {abs(offset)} (in `Training::with_lr_schedule(|step| ...)` or the "
                      f"rate passed to `optim.step` and `recorder.lr`, the step counted "
                      f"{'from 1, or advanced before the step' if offset > 0 else 'one behind'})")
        fixes = [offset_fix if f == _FIXES["lr_per_step"] else f for f in fixes]
        if offset_fix not in fixes:
            fixes.append(offset_fix)
    grouped = group_differences(a, b, comparison.a.metadata.get("params") or [],
                                comparison.b.metadata.get("params") or [])
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


def _factor_for_rate(a: dict, b: dict) -> bool:
    """Whether B's rate at every step is A's divided by A's base rate: a schedule that returns LambdaLR's factor."""
    ra, rb, base = a.get("lr_per_step"), b.get("lr_per_step"), a.get("lr")
    if not (isinstance(ra, list) and isinstance(rb, list) and len(ra) == len(rb) and ra
            and isinstance(base, (int, float)) and base and base != 1):
        return False
    return all(isinstance(x, (int, float)) and isinstance(y, (int, float)) and abs(y * base - x) <= 1e-6 * abs(x)
               for x, y in zip(ra, rb, strict=True))


def _schedule_offset(a: dict, b: dict) -> int | None:
    """The steps d (1 or 2, ahead or behind) by which B's schedule is A's shifted, B's rate at step k A's at step
    k + d for every step both have, over at least two steps and where A's rates change; None when there is none."""
    ra, rb = a.get("lr_per_step"), b.get("lr_per_step")
    if not (isinstance(ra, list) and isinstance(rb, list)) or not all(
            isinstance(x, (int, float)) for x in [*ra, *rb]):
        return None
    for d in (1, -1, 2, -2):
        pairs = [(ra[k + d], rb[k]) for k in range(len(rb)) if 0 <= k + d < len(ra)]
        if len(pairs) >= 2 and len({x for x, _ in pairs}) > 1 and all(
                abs(x - y) <= 1e-6 * max(abs(x), 1e-30) for x, y in pairs):
            return d
    return None


def _fix(key: str, optimizer: object) -> str | None:
    """The burn side's optimizer's own fix of ``key`` (`Optimizer.d005_fixes`), else the setting's."""
    spec = OPTIMIZERS.get(optimizer) if isinstance(optimizer, str) else None
    return (spec.d005_fixes.get(key) if spec is not None else None) or _FIXES.get(key)


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

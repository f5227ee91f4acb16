"""D009 update differs from the declared optimizer.

## What it does
Replays every step of each side in float64 from that side's own recorded tensors (params
before, gradients, the previous optimizer state) with the optimizer its trace declares, and
finds the first step whose update or optimizer state the replay does not reproduce. It then
measures the effective settings from the numbers (SGD: lr, weight decay, momentum,
dampening; Adam: lr, betas, epsilon, and the gradient clipping each step applied) and names
those that contradict the metadata.

Each element is judged beyond its float32 rounding (half an ulp of the parameter before and after, and
of the update's own arithmetic), so an update as small as that rounding (weight decay alone moving a
bias whose gradient is ~1e-9) is no mismatch. A step the PyTorch side's own replay does not reproduce
is no evidence against the port either: the replay does not model that optimizer.

## Why is this bad?
A trace's metadata says what the port meant to build, not what it built: a literal
`optim.step(0.01, ...)`, burn's `AdamConfig::new()` epsilon 1e-5, a weight decay or a
momentum dampening (burn's default 0.1) set on the burn optimizer but not in the recorded
spec, gradient clipping, or a step helper called twice all change the update while the
metadata still matches PyTorch's. The numbers show the truth.

## Example
```rust
let mut optim = SgdConfig::new().with_weight_decay(Some(WeightDecayConfig::new(0.01))).init();
let recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1)); // says: no weight decay
model = optim.step(0.01, model, grads); // says 0.1 above
```

## Use instead
```rust
let spec = OptimizerSpec::sgd(0.1); // one description for the optimizer and the trace
let mut optim = spec.init();
model = optim.step(spec.lr(), model, grads);
```
"""

from __future__ import annotations

import math

from burnside.compare import Comparison
from burnside.forensics import evidence_of
from burnside.diagnose.diagnosis import Diagnosis, number
from burnside.rule import Severity

ID = "D009"
NAME = "update-differs"
TITLE = "update differs from the declared optimizer"
SEVERITY = Severity.ERROR

# measured key -> (metadata key, index in a list value, absolute floor below which it cannot be resolved)
_SETTINGS = {
    "lr": ("lr", None, 0.0),
    "weight_decay": ("weight_decay", None, 1e-5),  # measured within 3e-7 of the truth on A1 and under momentum
    "momentum": ("momentum", None, 1e-3),
    "dampening": ("dampening", None, 1e-3),
    "beta_1": ("betas", 0, 1e-4),
    "beta_2": ("betas", 1, 1e-5),
    "eps": ("eps", None, 1e-6),  # the step-0 fit resolves eps to ~1e-7 on A1 (measured 2.2e-8 for 1e-8)
    "alpha": ("alpha", None, 1e-4),  # RMSprop; judged by 1 - alpha, as a beta (measured to ~1e-5 on A1)
    "lr_decay": ("lr_decay", None, 1e-5),  # Adagrad (measured to ~1e-6 on A1)
    "clip_grad_norm": ("clip_grad_norm", None, 0.0),  # infinity measured: no clipping
}
_RELATIVE = 0.05


def _declared(config: dict, key: str, index: int | None) -> float | None:
    schedule = config.get("lr_per_step")
    if key == "lr" and isinstance(schedule, list) and schedule:
        return number(schedule[0])  # the lr is measured at step 0, where the schedule starts
    value = config.get(key)
    if index is not None:
        value = value[index] if isinstance(value, list) and len(value) > index else None
    return number(value) if value is not None else (
        0.0 if key in ("weight_decay", "dampening", "momentum", "lr_decay") else None)


def contradictions(forensics) -> list[tuple[str, float, float]]:
    """(setting, declared, measured) for each measured setting the metadata gets wrong."""
    found = []
    for key, measured in forensics.measured.items():
        meta_key, index, floor = _SETTINGS[key]
        if key == "clip_grad_norm":
            # measured only where the updates contradict the declared clipping (none: infinity)
            declared = forensics.declared.get(meta_key)
            found.append((key, number(declared) if declared is not None else math.inf, measured))
            continue
        declared = _declared(forensics.declared, meta_key, index)
        if declared is None:
            continue
        gap = abs(measured - declared)
        # a beta is judged by 1 - beta, the weight the new gradient gets
        size = 1 - declared if key.startswith("beta") or key == "alpha" else declared
        if gap > floor and gap > _RELATIVE * max(abs(size), floor):
            found.append((key, declared, measured))
    return found


def _shown(key: str, measured: float) -> str:
    """A measured setting, 0 where the fit cannot tell it from zero (its floor), not -8.6e-19."""
    if key == "clip_grad_norm":
        return "no clipping" if math.isinf(measured) else f"gradients scaled to a joint norm of {measured:.4g}"
    return "0" if abs(measured) < _SETTINGS[key][2] else f"{measured:.6g}"


def _said(key: str, declared: float) -> str:
    if key == "clip_grad_norm":
        return "no clipping" if math.isinf(declared) else f"clip_grad_norm {declared:g}"
    return f"{key} {declared:g}"


_CLIP_FIX = ("clip as the PyTorch loop does, all gradients by their joint norm (`clip_grad_norm_`), and declare it: "
             "`let clip = ClipGradNorm::new(MAX_NORM);` `TraceRecorder::new(spec).with_clip_grad_norm(clip)`, then "
             "`let grads = clip.apply(&model, grads);` between `recorder.grads` and `optim.step`; burn's own "
             "`GradientClippingConfig::Norm` clips each tensor by its own norm, another update")


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per side whose updates the declared optimizer does not reproduce."""
    found = []
    evidence = evidence_of(comparison)
    sides = ((comparison.a, evidence.optimizer_a, evidence.optimizer_b, comparison.b),
             (comparison.b, evidence.optimizer_b, evidence.optimizer_a, comparison.a))
    for summary, forensics, other_forensics, other in sides:
        if forensics is None or forensics.mismatch_step is None:
            continue
        k = forensics.mismatch_step
        if summary.params_unchanged.get(k):
            continue  # no update at all: a discarded or skipped step (D001)
        if summary.diverged_at is not None and summary.diverged_at <= k:
            continue  # NaN and infinity replay to nothing: the run diverged (D016)
        if summary.framework == "pytorch" or (other.framework == "pytorch" and other_forensics is not None
                                              and other_forensics.mismatch_step is not None
                                              and other_forensics.mismatch_step <= k):
            # PyTorch's own updates are its declared optimizer: where the replay does not reproduce them, it does
            # not model that optimizer, and a port's updates it does not reproduce there are no evidence either
            continue
        name = forensics.declared.get("name", "optimizer")
        wrong = contradictions(forensics)
        evidence = (f"{summary.name}: from step {k}, its {forensics.mismatch_what} is "
                    f"{forensics.mismatch_residual:.3g} (relative) from a replay of the declared {name}")
        if wrong:
            evidence += "; " + "; ".join(f"the trace says {_said(key, declared)}; its updates show "
                                         f"{_shown(key, measured)}" for key, declared, measured in wrong)
            fix = ("configure the burn optimizer with the PyTorch values and record the spec it was built from "
                   "(`let spec = OptimizerSpec::...; let optim = spec.init(); optim.step(spec.lr(), ...)`)")
            if [key for key, _, _ in wrong] == ["clip_grad_norm"]:
                fix = _CLIP_FIX
        else:
            evidence += "; no setting of that optimizer explains it (gradient clipping, two updates per step, or a " \
                        "hand-written update)"
            fix = ("remove what changes the update besides the optimizer: gradient clipping the PyTorch loop does "
                   "not have, a second `optim.step` per batch, a modified gradient")
        found.append(Diagnosis(ID, TITLE, evidence, fix))
    return found

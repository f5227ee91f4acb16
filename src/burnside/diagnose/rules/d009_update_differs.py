"""D009 update differs from the declared optimizer.

## What it does
Replays every step of each side in float64 from that side's own recorded tensors (params
before, gradients, the previous optimizer state) with the optimizer its trace declares, and
finds the first step whose update or optimizer state the replay does not reproduce. It then
measures the effective settings from the numbers (SGD: lr, weight decay, momentum,
dampening, Nesterov; Adam: lr, betas, epsilon, weight decay of each kind (L2 in the moments,
decoupled in the update), AMSGrad, and the gradient clipping each step applied) and names
those that contradict the metadata, each parameter group's by its own updates. The learning
rate is also fitted one step at a time (SGD, Adam, AdamW, RMSprop, Adagrad): a rate the loop
changes between steps without declaring it is named step by step, with the schedule to declare,
and the same other rate at every step is named as the lr, where the fits over every step at once
would read either as another setting (RMSprop's or Adagrad's eps, Adagrad's lr_decay). Under
plain SGD, rates that follow the gradient norms as `min(1, c / |g|)` over two steps or more are
named as the joint-norm clipping at c they are. Where the declared optimizer does not reproduce the
updates, the optimizer as built is searched for: the fewest settings changed at once (burn's default of
each setting the declaration differs from, as a config built by hand with `new()` has wherever the port
set nothing; the other value of a flag, such as RMSprop's `centered`, whose state slot `grad_avg` one side
lacks; a value a one-setting fit measured) whose replay reproduces every update. Those are named, all of
them (`RmsPropConfig::new()` against PyTorch's RMSprop: momentum 0.9 and eps 1e-5; `AdamWConfig::new()`
against GPT's AdamW: beta_2, eps and weight decay), with the burn config that builds the declared
optimizer by hand (`burnside.optimizers.burn.burn_config`). AdamW's per-step rate is fitted with its decoupled
decay, which the rate scales too.

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

from burnside.optimizers import OPTIMIZERS
from burnside.optimizers.burn import BURN_CONFIGS, burn_config, config_type
from burnside.compare import Comparison
from burnside.optimizers.settings import group_config, known_optimizer
from burnside.forensics import evidence_of
from burnside.optimizers.replay import decoupled
from burnside.optimizers.values import setting
from burnside.diagnose.diagnosis import Diagnosis, listed, number
from burnside.rule import Severity

ID = "D009"
NAME = "update-differs"
TITLE = "update differs from the declared optimizer"
SEVERITY = Severity.ERROR
PRECEDENCE = 190  # the update itself: after every cause of it
CATALOGUE = "updating optimizer"  # its fix gains burn's known differences of the optimizer its updates show

# measured key -> (metadata key, index in a list value, absolute floor below which it cannot be resolved): the settings
# several optimizers' fits measure, then each optimizer's own (`Optimizer.fitted`)
_SHARED_SETTINGS = {
    "lr": ("lr", None, 0.0),
    "weight_decay": ("weight_decay", None, 1e-5),  # measured within 3e-7 of the truth on A1 and under momentum
    "momentum": ("momentum", None, 1e-3),
    "dampening": ("dampening", None, 1e-3),
    "beta_1": ("betas", 0, 1e-4),
    "beta_2": ("betas", 1, 1e-5),
    "eps": ("eps", None, 1e-6),  # the step-0 fit resolves eps to ~1e-7 on A1 (measured 2.2e-8 for 1e-8)
    "clip_grad_norm": ("clip_grad_norm", None, 0.0),  # infinity measured: no clipping
}
_SETTINGS = {**_SHARED_SETTINGS, **{key: own for o in OPTIMIZERS.values() for key, own in o.fitted.items()}}
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


#: Settings measured as on (1.0) or off (0.0).
_FLAGS = ("nesterov", "amsgrad")
#: Adam's weight decay, measured of each kind: (measured key, the kind it is).
_DECAYS = (("weight_decay_l2", "l2"), ("weight_decay_decoupled", "decoupled"))


def _differs(measured: float, declared: float, floor: float, size: float) -> bool:
    gap = abs(measured - declared)
    return gap > floor and gap > _RELATIVE * max(abs(size), floor)


def contradictions(forensics) -> list[tuple[str, object, object]]:
    """(setting, declared, measured) for each setting of the first parameter group the metadata gets wrong."""
    return _contradictions(forensics.measured, forensics.declared)


def _contradictions(measured_settings: dict, config: dict) -> list[tuple[str, object, object]]:
    """(setting, declared, measured) for each measured setting ``config`` (one group's) gets wrong."""
    found: list[tuple[str, object, object]] = []
    for key, measured in measured_settings.items():
        if key in _FLAGS:
            if bool(measured) != bool(config.get(key)):
                found.append((key, bool(config.get(key)), bool(measured)))
            continue
        if key in dict(_DECAYS):
            continue
        meta_key, index, floor = _SETTINGS[key]
        if key == "clip_grad_norm":
            # measured only where the updates contradict the declared clipping (none: infinity)
            declared = config.get(meta_key)
            found.append((key, number(declared) if declared is not None else math.inf, measured))
            continue
        declared = _declared(config, meta_key, index)
        if declared is None:
            continue
        # a beta is judged by 1 - beta, the weight the new gradient gets
        size = 1 - declared if key.startswith("beta") or key == "alpha" else declared
        if _differs(measured, declared, floor, size):
            found.append((key, declared, measured))
    decay = _decay_contradiction(measured_settings, config)
    if decay is not None:
        found.append(decay)
    return found


def _group(config: dict, index: int) -> tuple[dict, list[str]]:
    """Group ``index``'s declared settings and parameters; under a schedule, its rates are the schedule's scaled
    by its lr over the first group's, as the loop steps them."""
    own, params = group_config(config, index)
    schedule, base, lr = config.get("lr_per_step"), number(config.get("lr")), number(own.get("lr"))
    if isinstance(schedule, list) and base and lr is not None:
        own = {**own, "lr_per_step": [x * lr / base for x in schedule if isinstance(x, (int, float))]}
    return own, params


def _decay_contradiction(measured: dict, config: dict) -> tuple[str, object, object] | None:
    """Adam's weight decay as declared (its value and kind) against what each kind's fit measured, or None."""
    if not any(key in measured for key, _ in _DECAYS):
        return None
    wd = _declared(config, "weight_decay", None) or 0.0
    kind = "decoupled" if decoupled(str(config.get("name")), config) else "l2"
    floor = _SETTINGS["weight_decay"][2]
    wrong = [key for key, own in _DECAYS if key in measured
             and _differs(measured[key], wd if own == kind else 0.0, floor, wd if own == kind else 0.0)]
    if not wrong:
        return None
    shown = [(own, measured[key]) for key, own in _DECAYS if key in measured and abs(measured[key]) >= floor]
    return "weight_decay", (wd, kind), shown


_KINDS = {"l2": "L2, added to the gradient", "decoupled": "decoupled, applied to the parameter"}


def _shown(key: str, measured) -> str:
    """A measured setting, 0 where the fit cannot tell it from zero (its floor), not -8.6e-19."""
    if key == "clip_grad_norm":
        return "no clipping" if math.isinf(measured) else f"gradients scaled to a joint norm of {measured:.4g}"
    if key in _FLAGS:
        return f"{key} {'on' if measured else 'off'}"
    if key == "weight_decay" and isinstance(measured, list):
        # two digits: a decay of 1e-4 at lr 0.01 moves a parameter by 1e-6 of itself, near float32 rounding
        return " and ".join(f"weight decay {value:.2g} ({_KINDS[kind]})" for kind, value in measured) \
            or "no weight decay"
    return "0" if abs(measured) < _SETTINGS[key][2] else f"{measured:.6g}"


def _said(key: str, declared) -> str:
    if key == "clip_grad_norm":
        return "no clipping" if math.isinf(declared) else f"clip_grad_norm {declared:g}"
    if key in _FLAGS:
        return f"{key} {'on' if declared else 'off'}"
    if key == "weight_decay" and isinstance(declared, tuple):
        value, kind = declared
        return f"weight_decay {value:g} ({_KINDS[kind]})" if value else "no weight decay"
    return f"{key} {declared:g}"


def _fix(key: str, declared, optimizer: str) -> str | None:
    """The fix of one contradicted setting, where it is more than "build the optimizer from the spec": the declared
    optimizer's own (`Optimizer.d009_fix`)."""
    spec = OPTIMIZERS.get(optimizer)
    return spec.d009_fix(key, declared, optimizer) if spec is not None and spec.d009_fix is not None else None


_CLIP_FIX = ("clip as the PyTorch loop does, all gradients by their joint norm (`clip_grad_norm_`), and declare it: "
             "`let clip = ClipGradNorm::new(MAX_NORM);` `TraceRecorder::new(spec).with_clip_grad_norm(clip)`, then "
             "`let grads = clip.apply(&model, grads);` between `recorder.grads` and `optim.step`; burn's own "
             "`GradientClippingConfig::Norm` clips each tensor by its own norm, another update")


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per side whose updates the declared optimizer does not reproduce."""
    found = []
    if not known_optimizer(comparison.a.optimizer) or not known_optimizer(comparison.b.optimizer):
        return found  # an optimizer burnside does not know is compared as recorded (`optimizer_notes`)
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
        rates = _undeclared_rates(forensics, k)
        if rates:
            # one rate explains each step, and some step's is not the declared one: the settings read off the updates
            # of every step at once (RMSprop's and Adagrad's eps, Adagrad's lr_decay, a pooled lr) take another rate
            # for theirs, and are not its cause unless they give those very rates
            wrong = [w for w in wrong if w[0] not in _RATE_MIMICS or _gives_the_rates(w, forensics)]
            distinct = {round(lr, 6) for lr in forensics.lr_by_step.values()}
            if len(distinct) == 1 and len(rates) == len(forensics.lr_by_step) and not any(w[0] == "lr" for w in wrong):
                # the same other rate at every step: the optimizer's lr itself, as SGD's and Adam's fits say it
                wrong.append(("lr", rates[0][2], rates[0][1]))
        groups = [(i, *_group(forensics.declared, i)) for i in sorted(forensics.group_measured)]
        group_wrong = [(i, params, bad) for i, config, params in groups
                       if (bad := _contradictions(forensics.group_measured[i], config))]
        evidence = (f"{summary.name}: from step {k}, its {forensics.mismatch_what} is "
                    f"{forensics.mismatch_residual:.3g} (relative) from a replay of the declared {name}")
        built = forensics.as_built
        if built is not None and (len(built) > 1 or not (wrong or group_wrong or rates) or any(
                isinstance(v, bool) and k not in {w[0] for w in wrong} for k, v in built.items())):
            # a replay with these settings reproduces every update: the burn optimizer was built with them (several
            # settings off at once, or a flag, which a fit of one setting at a time reads as no setting or another);
            # one numeric setting off (an SGD's dampening 0.1) is the fit's to name, measured
            evidence += (f"; a replay with {_listed_settings(built)} reproduces every update, where the trace "
                         f"declares {_listed_settings({key: setting(forensics.declared, key) for key in built})}")
            defaults = [key for key, value in built.items() if BURN_CONFIGS.get(str(name), {}).get(key) == value]
            others = [key for key in built if key not in defaults]
            if defaults:
                evidence += (f": the burn optimizer was built with burn's default of {', '.join(defaults)} "
                             f"(`{config_type(str(name))}::new()` has burn's value of every setting it is not given")
                if forensics.burn_defaults is not None:
                    from burnside.catalogue import CATALOGUE

                    evidence += "; " + next(c for c in CATALOGUE if c.case == forensics.burn_defaults[0]).cause
                evidence += ")" + (f", and with {', '.join(others)} of its own" if others else "")
            else:
                evidence += ": the burn optimizer was built with those settings"
            code = burn_config(forensics.declared)
            fix = ("build the burn optimizer from the declared spec (`let optim = spec.init();`, `optim.step(lr, ...)` "
                   "with the rate `recorder.lr` records)" + (
                       f", or by hand with every declared value: `{code}`" if code else ""))
        elif wrong or group_wrong:
            lines = [(key, declared, measured, "") for key, declared, measured in wrong]
            lines += [(key, declared, measured, f" for parameter group {i} ({listed(params, 4)})")
                      for i, params, bad in group_wrong for key, declared, measured in bad]
            evidence += "; " + "; ".join(f"the trace says {_said(key, declared)}{where}; its updates show "
                                         f"{_shown(key, measured)}" for key, declared, measured, where in lines)
            fix = ("configure the burn optimizer with the PyTorch values and record the spec it was built from "
                   "(`let spec = OptimizerSpec::...; let optim = spec.init(); optim.step(spec.lr(), ...)`)")
            if [key for key, _, _, _ in lines] == ["clip_grad_norm"]:
                fix = _CLIP_FIX
            own = []
            for key, declared, _, _ in lines:
                text = _fix(key, declared, str(name))
                if text is not None and text not in own:
                    own.append(text)
            if own:
                fix = "; ".join(own)
            if group_wrong:
                fix += ("; each parameter group's burn optimizer is built from the spec declared for it: "
                        "`Training::with_group(spec, &names)`, or call by call "
                        "`TraceRecorder::with_group(spec.clone(), "
                        "&names)` with `spec.init()` stepping that group's part of the gradients")
        elif rates:
            evidence += "; its updates show " + ", ".join(
                f"learning rate {shown:.4g} at step {at} where the trace declares {said:.4g}"
                for at, shown, said in rates)
            fix = ("give `optim.step` the learning rate the PyTorch loop uses at each step, and declare the one each "
                   "step uses: a schedule through `Training::with_lr_schedule(..)` "
                   "(call by call `recorder.lr(k, lr)`), "
                   "so both traces carry it and D005 compares them")
            if (isinstance(forensics.declared.get("lr_per_step"), list)
                    and not _schedules_declared_otherwise(comparison)):
                # the port declares PyTorch's schedule (D005 finds nothing there) and steps with other rates
                fix = ("give `optim.step(lr, ...)` the very rate the port declares for that step, the one "
                       "`recorder.lr(k, lr)` records (with `Training`, the schedule's), not a constant or the spec's "
                       "base rate")
        else:
            evidence += "; no setting of that optimizer explains it (gradient clipping, two updates per step, or a " \
                        "hand-written update)"
            fix = ("remove what changes the update besides the optimizer: gradient clipping the PyTorch loop does "
                   "not have, a second `optim.step` per batch, a modified gradient")
        found.append(Diagnosis(ID, TITLE, evidence, fix))
    return found


def _listed_settings(values: dict) -> str:
    """Optimizer settings as a sentence lists them: `momentum 0.9, eps 1e-05, centered off`."""
    return ", ".join(f"{key} {('on' if value else 'off') if isinstance(value, bool) else format(value or 0.0, 'g')}"
                     for key, value in values.items())


#: The settings a learning rate changed between steps shows up as, when fitted over every step at once.
_RATE_MIMICS = ("lr", "eps", "lr_decay")

#: How far (relative) a step's measured learning rate must be from the declared one to be another rate.
_LR_APART = 1e-3


def _schedules_declared_otherwise(comparison: Comparison) -> bool:
    """Whether the two traces declare other rates per step (D005's `lr_per_step`)."""
    return "lr_per_step" in (comparison.optimizer_differences or [])


def _declared_rate(declared: dict, at: int) -> float | None:
    """The learning rate the trace declares for step ``at``: its schedule's, else its `lr`."""
    schedule = declared.get("lr_per_step")
    return number(schedule[at]) if isinstance(schedule, list) and at < len(schedule) else number(declared.get("lr"))


def _gives_the_rates(contradiction: tuple[str, object, object], forensics) -> bool:
    """Whether a setting the updates show in place of the declared one also gives the rate each step applied, as
    Adagrad's `lr_decay` does: step k's rate is the declared one times (1 + k d) / (1 + k d') for the declared d and
    the measured d'. A rate changed by hand follows no such curve."""
    key, declared, measured = contradiction
    if key != "lr_decay" or not isinstance(declared, (int, float)) or not isinstance(measured, (int, float)):
        return False
    for at, shown in forensics.lr_by_step.items():
        said = _declared_rate(forensics.declared, at)
        if said is None or 1 + at * measured <= 0:
            return False
        if abs(shown - said * (1 + at * declared) / (1 + at * measured)) > _LR_APART * said:
            return False
    return True


def _undeclared_rates(forensics, k: int) -> list[tuple[int, float, float]]:
    """(step, measured, declared) for each step from ``k`` on whose updates show another learning rate than the
    trace declares for it (its `lr`, or its schedule's `lr_per_step`): the rate fitted step by step."""
    found = []
    for at, shown in sorted(forensics.lr_by_step.items()):
        said = _declared_rate(forensics.declared, at)
        if at >= k and said is not None and said > 0 and abs(shown - said) > _LR_APART * said:
            found.append((at, shown, said))
    return found

"""Optimizer forensics: what optimizer a trace's own numbers show, next to what its metadata says.

Each step is replayed in float64 from the side's own recorded tensors (params before, gradients,
the previous step's optimizer state) with the declared optimizer (each of `burnside.optimizers` that has a
replay: SGD, Adam, AdamW, RMSprop, Adagrad, Adafactor, and Muon's momentum buffer; its module holds the replay
and the fits of its settings); a step whose recorded update (or state) the replay does not reproduce
is where the update differs from the declared optimizer. The effective settings are measured by
least squares from the same tensors.

A learning-rate schedule (`lr_per_step` in the metadata: the lr each step used) replays each step
with its own lr.

Gradient clipping (`clip_grad_norm` in the metadata, PyTorch's `clip_grad_norm_`) scales step k's
gradients by `c_k = min(1, max_norm / (||g_k|| + 1e-6))`, `||g_k||` the norm of all the recorded
(unclipped) gradients of the step together; the replay scales them so. Where an optimizer measures the
clipping its updates show (`Optimizer.clipping`: Adam's from the moments, plain SGD's from its rates per
step), it is reported as the `clip_grad_norm` it implies where it is not the declared one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from burnside.optimizers import OPTIMIZERS, Optimizer
from burnside.optimizers.burn import BURN_CONFIGS, BURN_DEFAULTS
from burnside.optimizers.replay import number, sampled
from burnside.optimizers.settings import group_config, group_index, group_settings
from burnside.optimizers.spec import Step
from burnside.optimizers.values import setting, with_setting
from burnside.trace import Trace, parse_name


@dataclass
class OptimizerForensics:
    """What one trace's updates show about its optimizer."""

    declared: dict
    measured: dict[str, float] = field(default_factory=dict)
    #: the first step whose update or state the declared optimizer does not reproduce
    mismatch_step: int | None = None
    mismatch_what: str = ""  # e.g. "params_after.fc1.weight"
    mismatch_residual: float = 0.0
    #: index in the declared `groups` -> the settings that group's own updates show, for each group that
    #: declares settings of its own (`measured` is the first group's)
    group_measured: dict[int, dict[str, float]] = field(default_factory=dict)
    #: SGD, Adam, AdamW, RMSprop, Adagrad: step -> the learning rate its updates show (the first group's), where one
    #: rate explains them
    lr_by_step: dict[int, float] = field(default_factory=dict)
    #: where the declared optimizer does not reproduce the updates and other settings do: those settings (trace keys,
    #: Adam's betas as ``beta_1``/``beta_2``), the fewest that reproduce every update (`_as_built`)
    as_built: dict[str, float | bool] | None = None
    #: where ``as_built`` holds burn's own defaults of the optimizer (a config built with `AdamWConfig::new()` and the
    #: like): the catalogue case and burn's values among them (``eps``, ``weight_decay``, ...)
    burn_defaults: tuple[str, dict[str, float]] | None = None

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"measured": self.measured, "mismatch_step": self.mismatch_step, "mismatch_what": self.mismatch_what,
                "mismatch_residual": self.mismatch_residual,
                "group_measured": {str(i): m for i, m in self.group_measured.items()},
                "lr_by_step": {str(k): lr for k, lr in self.lr_by_step.items()}, "as_built": self.as_built}


def measure_optimizer(trace: Trace) -> OptimizerForensics:
    """Replay each step of ``trace`` with its declared optimizer and measure the effective settings
    (see `_measure`); a NaN or infinity in a diverged run's tensors is evidence of nothing, not a warning."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        result = _measure(trace)
        if result.mismatch_step is not None:
            built = _as_built(trace, result.declared, result.measured)
            if built is not None:
                result.as_built, case = built
                if case:
                    burn = dict(BURN_DEFAULTS[result.declared["name"]][1])
                    result.burn_defaults = case, {k: v for k, v in built[0].items() if burn.get(k) == v}
        return result


class _Declaring:
    """``trace`` as if it declared ``optimizer``: its tensors, another optimizer's settings to replay."""

    def __init__(self, trace: Trace, optimizer: dict) -> None:
        self._trace, self.optimizer = trace, optimizer

    def __getattr__(self, name: str):
        return getattr(self._trace, name)

    def __contains__(self, name: str) -> bool:
        return name in self._trace


#: Fitted settings (`measured`'s keys) a search may take, as config keys (Adam's decay by the declared kind).
_FITTED = ("beta_1", "beta_2", "eps", "alpha", "momentum", "dampening", "lr_decay", "weight_decay")
#: How far (relative; a beta or alpha by 1 - beta) a fitted value is from the declared one to be a candidate.
_FIT_APART = 0.05
#: At most this many settings changed at once, and this many replays, in the search for the optimizer as built.
_MOST_CHANGED, _MOST_REPLAYS = 4, 40


def _candidates(declared: dict, measured: dict) -> list[tuple[str, float | bool]]:
    """The settings a port's optimizer may have been built with where the trace declares others: burn's default of
    every setting the declaration differs from (what a config built by hand with `new()` has wherever the port set
    nothing), the other value of each flag, and each setting a one-setting fit measured away from the declared."""
    name = declared.get("name")
    found: list[tuple[str, float | bool]] = []
    momentum = setting(declared, "momentum") or 0.0
    for key, burn in BURN_CONFIGS.get(name, {}).items():
        if name == "sgd" and key in ("momentum", "dampening", "nesterov") and not momentum:
            continue  # plain SGD: no MomentumConfig, nothing of it to default
        if setting(declared, key) != burn:
            found.append((key, burn))
    spec = OPTIMIZERS.get(name) if isinstance(name, str) else None
    for flag in spec.flags if spec is not None else ():
        if (flag, not setting(declared, flag)) not in found and not (name == "sgd" and not momentum):
            found.append((flag, not setting(declared, flag)))
    kind = "decoupled" if name == "adamw" else "l2"
    for key in _FITTED:
        value = measured.get(f"weight_decay_{kind}" if key == "weight_decay" and name in ("adam", "adamw") else key)
        said = setting(declared, key)
        if not isinstance(value, (int, float)) or isinstance(said, bool) or said is None:
            continue
        size = (lambda x: 1 - x) if key in ("beta_1", "beta_2", "alpha") else (lambda x: x)
        if abs(size(value) - size(said)) > _FIT_APART * max(abs(size(said)), 1e-12) and not any(
                k == key and abs(size(v) - size(value)) <= _FIT_APART * abs(size(v)) for k, v in found):
            found.append((key, float(value)))
    return found


def _as_built(trace: Trace, declared: dict, measured: dict) -> tuple[dict[str, float | bool], str | None] | None:
    """The settings, each where the declaration says another, with which a float64 replay reproduces every update
    of ``trace``, the fewest of them (a setting at most once), or None; with the catalogue case of burn's defaults
    of that optimizer when some of them are burn's (`BURN_DEFAULTS`). A burn optimizer built by hand
    (`RmsPropConfig::new()`, `AdamWConfig::new()` with betas of its own) is off in several settings at once, which
    a fit of one setting at a time reads as one of them, another, or none."""
    candidates = _candidates(declared, measured)
    replays = 0
    for size in range(1, min(len(candidates), _MOST_CHANGED) + 1):
        for subset in itertools.combinations(candidates, size):
            if len({key for key, _ in subset}) < size:
                continue
            replays += 1
            if replays > _MOST_REPLAYS:
                return None
            config = declared
            for key, value in subset:
                config = with_setting(config, key, value)
            if _measure(_Declaring(trace, config)).mismatch_step is None:
                values = dict(subset)
                name = declared.get("name")
                case, burn = BURN_DEFAULTS.get(name, ("", ())) if isinstance(name, str) else ("", ())
                ours = any(key in values and values[key] == value for key, value in burn)
                return values, (case if ours else None)
    return None


def _measure(trace: Trace) -> OptimizerForensics:
    """The replay and the fits, step by step.

    Reads the first SAMPLE elements of one parameter's tensors of one step at a time (the whole tensors for a replay
    that needs them, Adafactor's). Traces without params, gradients or an optimizer with a replay give an empty
    result: L-BFGS is not replayed, nor Muon's update, only its momentum buffer (docs/compare.md): Muon's PyTorch
    update rests on bfloat16 rounding, L-BFGS's on closure evaluations the trace does not hold.
    """
    config = trace.optimizer if isinstance(trace.optimizer, dict) else {}
    result = OptimizerForensics(declared=config)
    spec = OPTIMIZERS.get(str(config.get("name")))
    params = [p for p in (trace.metadata.get("params") or []) if isinstance(p, str)]
    if spec is None or spec.replay is None or spec.new_fits is None or not params:
        return result
    clip = number(config, "clip_grad_norm", 0.0)
    steps = max(trace.steps, 0)
    norms: dict[int, float] = {}

    def norm(k: int) -> float:
        if k not in norms:
            norms[k] = _grad_norm(trace, k, params)
        return norms[k]

    schedule = config.get("lr_per_step")
    schedule = [float(x) for x in schedule] if isinstance(schedule, list) and len(schedule) >= steps else None
    fits, group_fits = _replay_steps(trace, spec, config, params, steps, schedule, norm, result)
    base_lr = number(config, "lr", 0.0)
    result.measured = spec.measured(fits, base_lr)
    for i, found_fits in group_fits.items():
        result.group_measured[i] = spec.measured(found_fits, number(group_config(config, i)[0], "lr", 0.0))
    rates = getattr(fits, "step_lr", None)  # Muon and Adafactor fit no rate per step
    if rates is not None:
        result.lr_by_step = rates.rates()
    if spec.clipping is not None:
        def step_rate(k: int) -> float:
            return schedule[k] if schedule is not None else base_lr

        spec.clipping(fits, result.measured, result.lr_by_step, steps, clip, norm, step_rate)
    return result


def _replay_steps(trace: Trace, spec: Optimizer, config: dict, params: list[str], steps: int,
                  schedule: list[float] | None, norm: Callable[[int], float], result: OptimizerForensics
                  ) -> tuple[Any, dict[int, Any]]:
    """Replay every step of every parameter with ``spec``'s replay, noting the first miss in ``result``: the first
    group's fits and, by index in the declared `groups`, the fits of each group with settings of its own."""
    clip = number(config, "clip_grad_norm", 0.0)
    base_lr = number(config, "lr", 0.0)
    overrides = group_settings(config)
    # each group with settings of its own is fitted apart (its weight decay, its lr): index -> its fits
    group_of = group_index(config)
    new_fits, replay = spec.new_fits, spec.replay  # both set: `_measure` replays no other optimizer
    fits, group_fits = new_fits(), {}
    # (step, parameter) whose optimizer state a trace holds as statistics only (format version 3): the next step's
    # replay needs that state's values, so it is not replayed (a missing buffer would read as a fresh one)
    held = {(parsed.step, parsed.param) for n in getattr(trace, "statistics", None) or {}
            if (parsed := parse_name(n)) is not None and parsed.stage == "optim"}
    for k in range(steps):
        # the declared clipping's factor for this step; 1 without clipping
        coef = min(1.0, clip / (norm(k) + 1e-6)) if clip > 0 else 1.0
        for p in params:
            # a parameter of another group replays with its group's settings (a schedule scales every group's
            # lr alike) and is fitted with its group's parameters only
            own = overrides.get(p)
            cfg = {**config, **own} if own else config
            fit_to = group_fits.setdefault(group_of[p], new_fits()) if own and p in group_of else fits
            group_lr = number(cfg, "lr", base_lr)
            lr = (schedule[k] * (group_lr / base_lr if base_lr else 1.0)) if schedule is not None else group_lr
            step = _step(trace, spec, cfg, k, p, lr, coef, held)
            found = replay(step, fit_to) if step is not None else None
            if found is not None and result.mismatch_step is None:
                result.mismatch_step, result.mismatch_what, result.mismatch_residual = k, found[0], found[1]
    return fits, group_fits


def _step(trace: Trace, spec: Optimizer, config: dict, k: int, p: str, lr: float, coef: float,
          held: set) -> Step | None:
    """Step ``k`` of parameter ``p`` as ``spec``'s replay reads it, or None where the trace cannot replay it (a tensor
    missing or of another shape, the previous state held as statistics only)."""
    needed = (f"step{k}.params_before.{p}", f"step{k}.params_after.{p}", f"step{k}.grads.{p}")
    if not all(n in trace for n in needed) or len({trace.info(n).shape for n in needed}) != 1:
        return None
    if (k - 1, p) in held:
        return None
    wd = number(config, "weight_decay", 0.0)
    if spec.reads_whole:  # its update needs the tensor's RMS and means: it reads them whole itself
        return Step(trace, config, spec.name, k, p, lr, wd, coef)
    before, after, grad = (sampled(trace, name) for name in needed)
    if before is None or after is None or grad is None or before.shape != grad.shape:
        return None
    return Step(trace, config, spec.name, k, p, lr, wd, coef, before, after, grad)


#: Elements per read when a step's gradient norm is taken over whole tensors.
_NORM_CHUNK = 1 << 20


def _grad_norm(trace: Trace, k: int, params: list[str]) -> float:
    """The L2 norm of all of step ``k``'s recorded gradients together, in float64, read in chunks."""
    total = 0.0
    for p in params:
        name = f"step{k}.grads.{p}"
        if name not in trace:
            continue
        flat = trace.values(name).reshape(-1)
        for start in range(0, flat.size, _NORM_CHUNK):
            chunk = np.asarray(flat[start:start + _NORM_CHUNK], dtype=np.float64)
            total += float(np.dot(chunk, chunk))
        trace.release(name)
    return math.sqrt(total)

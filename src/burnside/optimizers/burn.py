"""burn-optim 0.22.1's side of each optimizer, gathered from the optimizers' modules: the defaults that differ from
PyTorch's (`BURN_DEFAULTS`, the catalogue names them after a diagnosis), every setting of a config built with `new()`
(`BURN_CONFIGS`, the optimizer forensics replays a port's updates with them), and the config that builds a declared
optimizer by hand (`burn_config`, D009 prints it)."""

from __future__ import annotations

from burnside.optimizers import OPTIMIZERS
from burnside.optimizers.values import rust_number, setting

#: By the optimizer's name in a trace (`sgd`, `adamw`, ...): the conformance case that measures burn's defaults where
#: they differ from PyTorch's (`burnside.catalogue`), and burn's value of each of those settings.
BURN_DEFAULTS: dict[str, tuple[str, tuple[tuple[str, float], ...]]] = {
    name: spec.burn_defaults for name, spec in OPTIMIZERS.items() if spec.burn_defaults is not None}

#: Every setting of a burn optimizer's config built with `new()`, by the trace's optimizer keys (Adam's betas as
#: `beta_1`, `beta_2`; flags as booleans; no weight decay as 0): what a port that builds the config by hand steps
#: with wherever it sets nothing. SGD's momentum, dampening and Nesterov are `MomentumConfig::new()`'s.
BURN_CONFIGS: dict[str, dict[str, float | bool]] = {
    name: dict(spec.burn_new) for name, spec in OPTIMIZERS.items() if spec.burn_new}


def _near(a: float | bool | None, b: float | bool) -> bool:
    if isinstance(b, bool) or isinstance(a, bool) or a is None:
        return a == b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30)


def config_type(name: str) -> str:
    """The burn config an optimizer of this name is built from (`AdamWConfig`; SGD's momentum `MomentumConfig`)."""
    spec = OPTIMIZERS.get(name)
    return spec.burn_config if spec is not None and spec.burn_config else "the optimizer's config"


def burn_config(config: dict) -> str | None:
    """The burn config that builds the optimizer a trace declares (``config``: its name and settings) by hand: the
    config's `new()` and a builder call for every setting where burn's default is not the declared one (SGD's
    momentum as a whole `MomentumConfig`, `Optimizer.burn_code`), so it steps as declared. None for an optimizer
    without one here."""
    spec = OPTIMIZERS.get(str(config.get("name")))
    if spec is None:
        return None
    if spec.burn_code is not None:
        return spec.burn_code(config)
    if not spec.burn_setters:
        return None
    parts = [f"{spec.burn_config}::new()"]
    for key, call in spec.burn_setters.items():
        value = setting(config, key)
        if value is None or _near(value, spec.burn_new[key]):
            continue
        if key == "weight_decay" and not value and "Some(" in call:
            continue  # no weight decay: burn's None
        parts.append(call.format(rust_number(value)))
    return "".join(parts)


__all__ = ["BURN_CONFIGS", "BURN_DEFAULTS", "burn_config", "config_type"]

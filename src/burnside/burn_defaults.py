"""burn-optim 0.22.1's defaults of the settings where they differ from PyTorch's, by the optimizer's name in a trace
(`sgd`, `adamw`, ...): the conformance case that measures them (`burnside.catalogue`) and burn's value of each setting,
under the trace's optimizer keys. The catalogue names them after a diagnosis; the optimizer forensics replays a port's
updates with them (a burn optimizer built with `AdamWConfig::new()` and the like)."""

from __future__ import annotations

BURN_DEFAULTS: dict[str, tuple[str, tuple[tuple[str, float], ...]]] = {
    "sgd": ("sgd/burn-default", (("dampening", 0.1),)),  # MomentumConfig
    "adam": ("adam/burn-default", (("eps", 1e-5),)),
    "adamw": ("adamw/burn-default", (("eps", 1e-5), ("weight_decay", 1e-4))),
    "rmsprop": ("rmsprop/burn-default-momentum", (("momentum", 0.9), ("eps", 1e-5))),
    "adagrad": ("adagrad/burn-default", (("eps", 1e-5),)),
    "muon": ("muon/burn-default", (("weight_decay", 0.0),)),
}

#: Every setting of a burn optimizer's config built with `new()`, by the trace's optimizer keys (Adam's betas as
#: `beta_1`, `beta_2`; flags as booleans; no weight decay as 0): what a port that builds the config by hand steps
#: with wherever it sets nothing. SGD's momentum, dampening and Nesterov are `MomentumConfig::new()`'s.
BURN_CONFIGS: dict[str, dict[str, float | bool]] = {
    "sgd": {"momentum": 0.9, "dampening": 0.1, "nesterov": False, "weight_decay": 0.0},
    "adam": {"beta_1": 0.9, "beta_2": 0.999, "eps": 1e-5, "weight_decay": 0.0, "amsgrad": False},
    "adamw": {"beta_1": 0.9, "beta_2": 0.999, "eps": 1e-5, "weight_decay": 1e-4, "amsgrad": False},
    "rmsprop": {"alpha": 0.99, "momentum": 0.9, "eps": 1e-5, "centered": False, "weight_decay": 0.0},
    "adagrad": {"lr_decay": 0.0, "eps": 1e-5, "weight_decay": 0.0},
}

#: The config each optimizer's settings are built with in burn, and each setting's builder call (`{}` its value).
_BUILDERS: dict[str, tuple[str, dict[str, str]]] = {
    "adam": ("AdamConfig", {"beta_1": ".with_beta_1({})", "beta_2": ".with_beta_2({})", "eps": ".with_epsilon({})",
                            "amsgrad": ".with_amsgrad({})",
                            "weight_decay": ".with_weight_decay(Some(WeightDecayConfig::new({})))"}),
    "adamw": ("AdamWConfig", {"beta_1": ".with_beta_1({})", "beta_2": ".with_beta_2({})", "eps": ".with_epsilon({})",
                              "weight_decay": ".with_weight_decay({})", "amsgrad": ".with_amsgrad({})"}),
    "rmsprop": ("RmsPropConfig", {"alpha": ".with_alpha({})", "momentum": ".with_momentum({})",
                                  "eps": ".with_epsilon({})", "centered": ".with_centered({})",
                                  "weight_decay": ".with_weight_decay(Some(WeightDecayConfig::new({})))"}),
    "adagrad": ("AdaGradConfig", {"lr_decay": ".with_lr_decay({})", "eps": ".with_epsilon({})",
                                  "weight_decay": ".with_weight_decay(Some(WeightDecayConfig::new({})))"}),
}


def rust_number(value: float | bool) -> str:
    """``value`` as a Rust literal of a float (or bool) setting: `1e-8`, `0.95`, `0.0`, `true`."""
    if isinstance(value, bool):
        return str(value).lower()
    text = f"{float(value):.6g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"
    return text if "." in text else f"{text}.0"


def setting(config: dict, key: str) -> float | bool | None:
    """A trace's optimizer setting by the keys of `BURN_CONFIGS` (Adam's betas by index; an absent flag is off and an
    absent weight decay or dampening 0); None when absent and without a default."""
    if key in ("beta_1", "beta_2"):
        betas = config.get("betas")
        index = 0 if key == "beta_1" else 1
        return float(betas[index]) if isinstance(betas, list) and len(betas) > index else None
    value = config.get(key)
    if key in ("nesterov", "amsgrad", "centered"):
        return bool(value)
    if value is None and key in ("weight_decay", "dampening", "momentum", "lr_decay"):
        return 0.0
    return float(value) if isinstance(value, (int, float)) else None


def with_setting(config: dict, key: str, value: float | bool) -> dict:
    """``config`` (a trace's optimizer settings) with ``key`` (a `BURN_CONFIGS` key) set to ``value``."""
    if key in ("beta_1", "beta_2"):
        betas = list(config.get("betas") or [0.9, 0.999])
        betas[0 if key == "beta_1" else 1] = value
        return {**config, "betas": betas}
    return {**config, key: value}


def _near(a: float | bool | None, b: float | bool) -> bool:
    if isinstance(b, bool) or isinstance(a, bool) or a is None:
        return a == b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30)


def config_type(name: str) -> str:
    """The burn config an optimizer of this name is built from (`AdamWConfig`; SGD's momentum `MomentumConfig`)."""
    return "MomentumConfig" if name == "sgd" else _BUILDERS[name][0] if name in _BUILDERS else "the optimizer's config"


def burn_config(config: dict) -> str | None:
    """The burn config that builds the optimizer a trace declares (``config``: its name and settings) by hand: the
    config's `new()` and a builder call for every setting where burn's default is not the declared one (SGD's
    momentum as a whole `MomentumConfig`), so it steps as declared. None for an optimizer without one here."""
    name = config.get("name")
    if name == "sgd":
        parts = ["SgdConfig::new()"]
        momentum = setting(config, "momentum") or 0.0
        if momentum:
            # every MomentumConfig setting spelled out: burn's dampening default (0.1) is PyTorch's trap
            parts.append(f".with_momentum(Some(MomentumConfig::new().with_momentum({rust_number(momentum)})"
                         f".with_dampening({rust_number(setting(config, 'dampening') or 0.0)})"
                         f".with_nesterov({rust_number(bool(setting(config, 'nesterov')))})))")
        decay = setting(config, "weight_decay") or 0.0
        if decay:
            parts.append(f".with_weight_decay(Some(WeightDecayConfig::new({rust_number(decay)})))")
        return "".join(parts)
    if name not in _BUILDERS:
        return None
    type_name, calls = _BUILDERS[name]
    parts = [f"{type_name}::new()"]
    for key, call in calls.items():
        value = setting(config, key)
        if value is None or _near(value, BURN_CONFIGS[name][key]):
            continue
        if key == "weight_decay" and name != "adamw" and not value:
            continue  # no weight decay: burn's None
        parts.append(call.format(rust_number(value)))
    return "".join(parts)


__all__ = ["BURN_CONFIGS", "BURN_DEFAULTS", "burn_config", "config_type", "rust_number", "setting", "with_setting"]

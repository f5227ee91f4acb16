"""A trace's optimizer settings read and changed by burn's config keys (Adam's betas as `beta_1`, `beta_2`), and a
setting as a Rust literal."""

from __future__ import annotations


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
    """A trace's optimizer setting by the keys of burn's configs (`Optimizer.burn_new`; Adam's betas by index, an
    absent flag off, an absent weight decay or dampening 0); None when absent and without a default."""
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
    """``config`` (a trace's optimizer settings) with ``key`` (a key of `Optimizer.burn_new`) set to ``value``."""
    if key in ("beta_1", "beta_2"):
        betas = list(config.get("betas") or [0.9, 0.999])
        betas[0 if key == "beta_1" else 1] = value
        return {**config, "betas": betas}
    return {**config, key: value}


__all__ = ["rust_number", "setting", "with_setting"]

"""The optimizer settings two traces declare otherwise: part of the verdict, named by D005.

A port whose optimizer is configured otherwise than PyTorch's (a dampening of 0.1, a clipping norm, a
schedule, a parameter group's weight decay) trains another optimizer even where the recorded steps do not
show it yet (momentum's dampening from the second step on, clipping only once a gradient is large, a
schedule's later rates): the comparison fails on it, and D005 says which setting and how to fix it.
"""

from __future__ import annotations

import math

from burnside.optimizers import OPTIMIZERS

#: The declared settings compared, apart from Adam's epsilon (D004's, measured from the numbers): those of SGD,
#: Adam, RMSprop and Adagrad and the loop's (clipping, a schedule), then each optimizer's own (`Optimizer.compared`),
#: in the order D005 names them.
SHARED_KEYS = ("name", "lr", "betas", "momentum", "dampening", "nesterov", "weight_decay", "weight_decay_kind",
               "amsgrad", "alpha", "centered", "lr_decay", "initial_accumulator_value", "clip_grad_norm", "lr_per_step")
KEYS = tuple(dict.fromkeys(SHARED_KEYS + tuple(k for o in OPTIMIZERS.values() for k in o.compared)))
#: The optimizers whose epsilon is compared here (no rule of its own, as Adam's D004).
OWN_EPS = tuple(name for name, o in OPTIMIZERS.items() if o.own_eps)
#: A trace says these only when its loop has them (clipping, a schedule): absent is "none".
OPTIONAL = ("clip_grad_norm", "lr_per_step")
#: The settings a parameter group can hold.
GROUP_KEYS = ("lr", "betas", "eps", "weight_decay", "momentum", "dampening", "nesterov", "amsgrad", "alpha", "centered",
              "lr_decay", "initial_accumulator_value")


def same_setting(a: object, b: object, *, abs_tol: float = 0.0) -> bool:
    """Whether two optimizer settings from trace metadata agree: numbers to 1e-6 relative (a setting
    written through float32; ``abs_tol`` for values near 0), lists element by element, the rest equal."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_setting(x, y, abs_tol=abs_tol) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=abs_tol)
    return a == b


def same(a: object, b: object) -> bool:
    """One setting on both sides (a schedule computed in another order may part near 0 by more than 1e-6
    relative, so an absolute 1e-12 is the same too)."""
    return same_setting(a, b, abs_tol=1e-12)


def group_settings(config: dict) -> dict[str, dict]:
    """Parameter name -> the settings its group declares otherwise than the first group (`groups`)."""
    found: dict[str, dict] = {}
    groups = config.get("groups")
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict) or not isinstance(group.get("params"), list):
            continue
        own = {k: v for k, v in group.items() if k != "params"}
        if own:
            found.update({p: own for p in group["params"] if isinstance(p, str)})
    return found


def group_index(config: dict) -> dict[str, int]:
    """Parameter name -> the index in `groups` of the group that declares settings of its own for it; the
    parameters of the first group (and of a group declaring nothing else) are not listed: theirs are the
    configuration's own."""
    found: dict[str, int] = {}
    groups = config.get("groups")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        if isinstance(group, dict) and isinstance(group.get("params"), list) and set(group) - {"params"}:
            found.update({p: i for p in group["params"] if isinstance(p, str)})
    return found


def group_config(config: dict, index: int) -> tuple[dict, list[str]]:
    """Group ``index``'s settings (the configuration's, with the group's own over them) and its parameters."""
    groups = config.get("groups")
    group = groups[index] if isinstance(groups, list) and 0 <= index < len(groups) else {}
    group = group if isinstance(group, dict) else {}
    params = [p for p in group.get("params") or [] if isinstance(p, str)]
    return {**{k: v for k, v in config.items() if k != "groups"},
            **{k: v for k, v in group.items() if k != "params"}}, \
        params


def known_optimizer(config: object) -> bool:
    """Whether a trace's optimizer is one burnside knows (`OPTIMIZERS`: the recorder describes each with its settings,
    burnside-trace's `OptimizerSpec` builds each; their settings are compared key by key (D005) and replayed from the
    numbers where the optimizer has a replay (D009)); True when the trace names none. Another (a
    `torch.optim.Optimizer` subclass with its own `step`, a class burnside does not know) is recorded with what its
    parameter groups say, and its updates are only compared as recorded."""
    return not isinstance(config, dict) or not config.get("name") or config.get("name") in OPTIMIZERS


def optimizer_notes(a: object, b: object) -> list[str]:
    """One line per side whose optimizer burnside cannot replay: what the verdict then rests on."""
    notes = []
    for config in (a, b):
        if known_optimizer(config):
            continue
        shown = config.get("class") or config.get("name")
        note = (f"optimizer `{shown}`: burnside cannot replay it; its updates are compared as recorded, "
                "no optimizer diagnosis")
        if note not in notes:
            notes.append(note)
    return notes


def differing_keys(a: dict, b: dict) -> list[str]:
    """The declared settings (`KEYS`) the two optimizer configurations give other values."""
    if not a or not b:
        return []
    keys = KEYS + (("eps",) if a.get("name") in OWN_EPS or b.get("name") in OWN_EPS else ())
    return [k for k in keys if ((k in a and k in b) or k in OPTIONAL) and not same(_rates(a, k), _rates(b, k))]


def _rates(config: dict, key: str) -> object:
    """``config[key]``; a `lr_per_step` that is the base rate at every step is no schedule: None (a loop written call by
    call records each step's rate with `recorder.lr(k, lr)`, a constant one too)."""
    value = config.get(key)
    if key == "lr_per_step" and isinstance(value, list) and value and all(same(v, config.get("lr")) for v in value):
        return None
    return value


def group_differences(a: dict, b: dict, params_a: list, params_b: list) -> dict[str, tuple[list[str], object, object]]:
    """Per group setting, the parameters whose group gives it another value on each side (where a side has groups),
    with the first such pair of values."""
    if not a or not b or ("groups" not in a and "groups" not in b):
        return {}
    shared = set(params_b)
    own_a, own_b = group_settings(a), group_settings(b)
    found: dict[str, tuple[list[str], object, object]] = {}
    for param in (p for p in params_a if p in shared):
        for key in GROUP_KEYS:
            x, y = own_a.get(param, {}).get(key, a.get(key)), own_b.get(param, {}).get(key, b.get(key))
            if (key in own_a.get(param, {}) or key in own_b.get(param, {})) and not same(x, y):
                params, _, _ = found.setdefault(key, ([], x, y))
                params.append(param)
    return found


def optimizer_differences(a: dict, b: dict, params_a: list, params_b: list) -> list[str]:
    """Every setting the two traces' optimizers declare otherwise: a key, or `groups.{key}` for a parameter
    group's; empty when either trace does not describe its optimizer."""
    if not isinstance(a, dict) or not isinstance(b, dict) or not known_optimizer(a) or not known_optimizer(b):
        return []  # an optimizer burnside does not know is compared by its updates only (`optimizer_notes`)
    return differing_keys(a, b) + [f"groups.{k}" for k in group_differences(a, b, params_a or [], params_b or [])]

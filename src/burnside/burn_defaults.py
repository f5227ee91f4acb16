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

__all__ = ["BURN_DEFAULTS"]

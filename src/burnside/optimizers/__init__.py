"""The optimizers burnside knows, one module each (`sgd`, `adam`, `adamw`, `rmsprop`, `adagrad`, `adafactor`, `muon`,
`lbfgs`), each with its `Optimizer` (`burnside.optimizers.spec`): its settings and defaults in PyTorch and burn, how
its state is recorded, its float64 reference variant, its replay and fits, its fixes. `OPTIMIZERS` is the one list
of them; every stage reads an optimizer from it by its name in a trace.

This package sits low: it imports `burnside.trace`, numpy and the standard library (torch only inside functions), so
the recorder, compare, forensics and diagnose all read it.
"""

from __future__ import annotations

from burnside.optimizers import adafactor, adagrad, adam, adamw, lbfgs, muon, rmsprop, sgd
from burnside.optimizers.spec import SLOTS, Optimizer

#: By the name in a trace, in the order `burnside run a1 --optim` lists them. A new optimizer is a module here and
#: its line below.
OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (sgd.OPTIMIZER, adam.OPTIMIZER, adamw.OPTIMIZER,
                                                         rmsprop.OPTIMIZER, adagrad.OPTIMIZER, adafactor.OPTIMIZER,
                                                         muon.OPTIMIZER, lbfgs.OPTIMIZER)}


def by_torch_class(name: str) -> Optimizer | None:
    """The optimizer whose torch.optim class is called ``name`` (`AdamW`), or None."""
    return next((o for o in OPTIMIZERS.values() if o.torch_class == name), None)


def a1_optimizers() -> tuple[str, ...]:
    """The names `burnside run a1 --optim` takes (SGD also as `momentum`)."""
    return tuple(n for o in OPTIMIZERS.values() for n in o.a1_names)


__all__ = ["OPTIMIZERS", "SLOTS", "Optimizer", "a1_optimizers", "by_torch_class"]

"""L-BFGS (`torch.optim.LBFGS`; burn's `LBFGSConfig`): its settings on both sides. It is not replayed: its step rests
on closure evaluations (the line search, each inner iteration's loss and gradients) that a trace does not hold, and
its state is one for the whole model (its history of flat steps and gradient changes), no per-parameter slot: none is
recorded."""

from __future__ import annotations

from collections.abc import Mapping

from burnside.optimizers.spec import SLOTS, Optimizer


def _torch_settings(group: Mapping) -> dict:
    return {"name": "lbfgs", "lr": float(group["lr"]), "max_iter": int(group["max_iter"]),
            "max_eval": int(group["max_eval"]), "tolerance_grad": float(group["tolerance_grad"]),
            "tolerance_change": float(group["tolerance_change"]), "history_size": int(group["history_size"]),
            "line_search_fn": group["line_search_fn"], "maximize": bool(group.get("maximize", False))}


OPTIMIZER = Optimizer(
    name="lbfgs", torch_class="LBFGS", torch_settings=_torch_settings, unused_slots=SLOTS,
    compared=("max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size", "line_search_fn"),
    d005_fixes={"max_iter": ("give L-BFGS the PyTorch loop's iterations per step: "
                             "`OptimizerSpec::lbfgs(lr).with_lbfgs(max_iter, None, history_size, false)`; by hand, "
                             "`LBFGSConfig::new().with_max_iter(..)` (burn's and PyTorch's default is 20)")},
    a1_names=("lbfgs",), a1_settings=("lr", "max_iter", "history_size"))


__all__ = ["OPTIMIZER"]

"""Muon (`torch.optim.Muon`; burn's `MuonConfig`): its settings on both sides, and its replay: each step's momentum
buffer of one parameter replayed in float64 from its recorded tensors (PyTorch's moving average, which the burn
recorder records for burn's momentum sum, docs/compare.md):
`momentum_buffer_k = momentum * momentum_buffer_{k-1} + (1 - momentum) * g` (0 before step 0).

The update itself is not replayed: PyTorch runs its Newton-Schulz iteration in bfloat16, and the iteration does not
converge, so no float64 replay reproduces PyTorch's own update within rounding (D009 is silent where PyTorch's replay
fails). The buffer shows a momentum other than the declared one (burn's `MomentumConfig::new()`: 0.9 with dampening
0.1), and the momentum is fitted from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from burnside.optimizers.replay import (
    REPLAY_TOLERANCE,
    Rows,
    beyond_rounding,
    explains,
    finite,
    half_ulp,
    number,
    sampled,
)
from burnside.optimizers.spec import BurnVariant, Optimizer, Step
from burnside.trace import Trace


@dataclass
class MuonFits:
    """The rows Muon's momentum is fitted on: (buf_{k-1}, g) -> buf_k, coefficients momentum and 1 - momentum."""

    buffer_x: Rows = field(default_factory=Rows)
    buffer_y: Rows = field(default_factory=Rows)

    def settings(self) -> dict[str, float]:
        """The momentum the buffers show (only where the fit explains them)."""
        x, y = finite(self.buffer_x.all(), self.buffer_y.all())
        if x is None or x.shape[0] < 3 or not np.any(x[:, 0]):
            return {}
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        return {"momentum": float(coef[0])} if explains(x, y, coef) else {}


def replay_muon(trace: Trace, config: dict, k: int, p: str, grad: np.ndarray, fits: MuonFits
                ) -> tuple[str, float] | None:
    """Replay step ``k``'s momentum buffer of parameter ``p`` with the declared Muon; (what the replay misses, its
    residual) or None when it reproduces the recorded buffer (or the side records none)."""
    momentum = number(config, "momentum", 0.95)
    buf = sampled(trace, f"step{k}.optim.momentum_buffer.{p}")
    if buf is None or buf.shape != grad.shape:
        return None
    prev = sampled(trace, f"step{k - 1}.optim.momentum_buffer.{p}") if k > 0 else None
    prev = np.zeros_like(grad) if prev is None or prev.shape != grad.shape else prev
    if k > 0:
        fits.buffer_x.add(np.stack([prev, grad], axis=1))
        fits.buffer_y.add(buf)
    expected = momentum * prev + (1 - momentum) * grad
    rounding = half_ulp(buf) + half_ulp(momentum * prev) + 4 * half_ulp((1 - momentum) * grad)
    residual = beyond_rounding(buf, expected, expected, rounding)
    return (f"optim.momentum_buffer.{p}", residual) if residual > REPLAY_TOLERANCE else None


def _replay(step: Step, fits: MuonFits) -> tuple[str, float] | None:
    return replay_muon(step.trace, step.config, step.k, step.param, step.coef * step.grad, fits)


def _torch_settings(group: Mapping) -> dict:
    return {"name": "muon", "lr": float(group["lr"]), "weight_decay": float(group["weight_decay"]),
            "weight_decay_kind": "decoupled", "momentum": float(group["momentum"]),
            "nesterov": bool(group["nesterov"]), "ns_coefficients": [float(c) for c in group["ns_coefficients"]],
            "eps": float(group["eps"]), "ns_steps": int(group["ns_steps"]),
            "adjust_lr_fn": group["adjust_lr_fn"] or "original"}



def _burn_update(p, state: dict, group: Mapping) -> None:
    """One Muon update of ``p`` on float64 tensors as burn-optim 0.22.1 computes it: the Newton-Schulz iteration in
    the parameters' dtype (PyTorch's casts the update to bfloat16 first, whatever the parameters' dtype), its
    coefficients, epsilon, momentum and weight decay held as f32 (muon.rs `NewtonSchulzParams`, momentum.rs
    `Momentum`).

    burn keeps the momentum sum ``v = momentum * v + g`` (Nesterov: ``g + momentum * v``), PyTorch the moving average
    ``(1 - momentum) * v``; the iteration's normalisation by the Frobenius norm makes the two updates equal. The state
    is recorded as PyTorch's ``momentum_buffer`` (``(1 - momentum) * v``), as the burn recorder records burn's.
    The quintic iteration does not converge (it leaves singular values spread over roughly 0.5 to 1.5), so a rounding
    of its input is not rounded away: measured on A1's first step, bfloat16's moves the update by 60% of its size.
    """
    from torch.optim._muon import _adjust_lr

    a, b, c = (float(np.float32(x)) for x in group["ns_coefficients"])
    eps, momentum = float(np.float32(group["eps"])), float(np.float32(group["momentum"]))
    wd, lr = float(np.float32(group["weight_decay"])), group["lr"]
    grad = p.grad
    total = state.get("velocity")  # burn's name; no trace slot, so not recorded
    total = grad.clone() if total is None else total * momentum + grad
    state["velocity"] = total
    state["momentum_buffer"] = total * (1 - group["momentum"])
    update = grad + total * momentum if group["nesterov"] else total
    x = update.T if update.shape[0] > update.shape[1] else update
    x = x / x.norm().clamp(min=eps)
    for _ in range(group["ns_steps"]):
        gram = x @ x.T
        x = x * a + (gram * b + gram @ gram * c) @ x
    x = x.T if update.shape[0] > update.shape[1] else x
    if wd:
        p.mul_(1 - lr * wd)
    p.sub_(x * _adjust_lr(lr, group["adjust_lr_fn"], p.shape))


def _burn_settings(group: Mapping, kind: str) -> dict:
    return {k: group[k] for k in ("lr", "weight_decay", "momentum", "nesterov", "ns_coefficients", "eps", "ns_steps",
                                  "adjust_lr_fn")}


OPTIMIZER = Optimizer(
    name="muon", torch_class="Muon", torch_settings=_torch_settings,
    compared=("ns_coefficients", "ns_steps", "adjust_lr_fn"), own_eps=True,
    # burn runs the Newton-Schulz iteration in the parameters' dtype
    burn_variant=BurnVariant("burn-muon", "_BurnMuon", _burn_settings, _burn_update),
    new_fits=MuonFits, replay=_replay,
    burn_defaults_setter="with_weight_decay", burn_defaults=("muon/burn-default", (("weight_decay", 0.0),)),
    d005_fixes={
        "weight_decay": ("give Muon PyTorch's weight decay: `OptimizerSpec::muon(lr)` has it (0.1); by hand, "
                         "`MuonConfig::new().with_weight_decay(Some(WeightDecayConfig::new(0.1)))` (burn's "
                         "default is none)"),
        "adjust_lr_fn": ("give Muon PyTorch's lr adjustment: `OptimizerSpec::muon(lr).with_muon(..)` or "
                         "`MuonConfig::with_adjust_lr_fn(AdjustLrFn::MatchRmsAdamW)` for \"match_rms_adamw\" "
                         "(burn's \"original\" reads burn's [d_in, d_out] Linear weight, "
                         "the transpose of PyTorch's)")},
    a1_names=("muon",), a1_settings=("lr", "weight_decay", "momentum", "nesterov", "eps", "ns_steps"))


__all__ = ["OPTIMIZER", "MuonFits", "replay_muon"]


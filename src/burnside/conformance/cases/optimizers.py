"""Every optimizer of torch.optim with a burn twin, a few settings each: ``nn.Linear(5, 4)`` trained 3 steps
under ``F.mse_loss(layer(x), target)`` (burn side: rust/conformance/src/cases/optimizers.rs).

The ``*/burn-default`` cases are a port that builds burn's optimizer with ``XConfig::new()`` (its own defaults)
and declares PyTorch's: the numbers show the default burn sets otherwise, and the case's ``default`` hypothesis,
PyTorch's optimizer built with burn's value (the hypothesis' ``optimizer``), names it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from burnside.conformance.case import Case, Hypothesis

#: The shapes of the batch: 8 samples (more than the 6 weights per output, so no step fits them exactly) of 5
#: features, 4 targets each.
_BATCH, _IN, _OUT = 8, 5, 4


def _optim(cls: type[torch.optim.Optimizer], **settings):
    """The optimizer factory ``cls(params, **settings)``."""
    return lambda params: cls(params, **settings)


def _burn_adam(*, lr: float, eps: float, weight_decay: float, decoupled: bool):
    """Adam/AdamW with burn's float32 constants (the referee's `burn-adam` variant) and these settings."""
    from burnside.recording.reference import variant_class

    return _optim(variant_class("adam"), lr=lr, betas=(0.9, 0.999), eps=eps, weight_decay=weight_decay,
                  decoupled=decoupled)


def _burn_muon(*, lr: float, weight_decay: float):
    """Muon with burn's Newton-Schulz arithmetic (the referee's `burn-muon` variant), PyTorch's other defaults."""
    from burnside.recording.reference import variant_class

    return _optim(variant_class("muon"), lr=lr, weight_decay=weight_decay, momentum=0.95, nesterov=True,
                  ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None)


def _batch(inputs: int):
    def draw(generator: torch.Generator) -> dict[str, torch.Tensor]:
        return {"x": torch.randn(_BATCH, inputs, generator=generator),
                "target": torch.randn(_BATCH, _OUT, generator=generator)}
    return draw


def _case(id: str, title: str, optimizer, *, inputs: int = _IN, bias: bool = True, **kw) -> Case:
    """``nn.Linear(inputs, 4)`` (``bias``) trained 3 steps with ``optimizer`` under the mean squared error."""
    return Case(id, title, lambda: nn.Linear(inputs, _OUT, bias=bias), None,
                call=lambda layer, x, batch: layer(batch["x"]), batch=_batch(inputs),
                loss=lambda out, batch: F.mse_loss(out, batch["target"]), loss_name="mse_loss",
                optimizer=optimizer, steps=3, tags=("optimizer",), **kw)


def _default(cause: str, fix: str, optimizer) -> Hypothesis:
    """Burn's default: the PyTorch ``optimizer`` (a factory) built with burn's value (by a variant's optimizer where
    burn's arithmetic differs too)."""
    return Hypothesis("default", cause, fix=fix, optimizer=optimizer)


SGD, Adam, AdamW, RMSprop, Adagrad = (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop,
                                      torch.optim.Adagrad)

CASES = [
    # SGD
    _case("sgd/plain", "SGD(lr=0.1)", _optim(SGD, lr=0.1), ci=True),
    _case("sgd/momentum", "SGD(lr=0.1, momentum=0.9)", _optim(SGD, lr=0.1, momentum=0.9)),
    _case("sgd/momentum-dampening", "SGD(lr=0.1, momentum=0.9, dampening=0.5)",
          _optim(SGD, lr=0.1, momentum=0.9, dampening=0.5)),
    _case("sgd/nesterov", "SGD(lr=0.1, momentum=0.9, nesterov=True)", _optim(SGD, lr=0.1, momentum=0.9, nesterov=True)),
    _case("sgd/weight-decay", "SGD(lr=0.1, weight_decay=0.05)", _optim(SGD, lr=0.1, weight_decay=0.05)),
    _case("sgd/momentum-weight-decay", "SGD(lr=0.1, momentum=0.9, weight_decay=0.05)",
          _optim(SGD, lr=0.1, momentum=0.9, weight_decay=0.05)),
    _case("sgd/burn-default", "SGD(lr=0.1, momentum=0.9); burn: MomentumConfig::new()",
          _optim(SGD, lr=0.1, momentum=0.9),
          hypotheses=(_default("burn's MomentumConfig dampening defaults to 0.1; PyTorch's SGD dampening to 0",
                               "MomentumConfig::new().with_dampening(0.0)",
                               _optim(SGD, lr=0.1, momentum=0.9, dampening=0.1)),)),
    # Adam
    _case("adam/default", "Adam(params), defaults", _optim(Adam), ci=True),
    _case("adam/eps", "Adam(lr=0.01, eps=1e-6)", _optim(Adam, lr=0.01, eps=1e-6)),
    _case("adam/betas", "Adam(lr=0.01, betas=(0.8, 0.99))", _optim(Adam, lr=0.01, betas=(0.8, 0.99))),
    _case("adam/weight-decay", "Adam(lr=0.01, weight_decay=0.1)", _optim(Adam, lr=0.01, weight_decay=0.1)),
    _case("adam/amsgrad", "Adam(lr=0.01, amsgrad=True)", _optim(Adam, lr=0.01, amsgrad=True)),
    _case("adam/burn-default", "Adam(lr=0.01); burn: AdamConfig::new()", _optim(Adam, lr=0.01),
          hypotheses=(_default("burn's AdamConfig epsilon defaults to 1e-5; PyTorch's Adam eps to 1e-8",
                               "AdamConfig::new().with_epsilon(1e-8)",
                               _burn_adam(lr=0.01, eps=1e-5, weight_decay=0.0, decoupled=False)),)),
    # AdamW
    _case("adamw/default", "AdamW(params), defaults (weight_decay 0.01)", _optim(AdamW)),
    _case("adamw/weight-decay", "AdamW(lr=0.01, weight_decay=0.1)", _optim(AdamW, lr=0.01, weight_decay=0.1)),
    _case("adamw/amsgrad", "AdamW(lr=0.01, amsgrad=True)", _optim(AdamW, lr=0.01, amsgrad=True)),
    _case("adamw/burn-default", "AdamW(lr=0.01); burn: AdamWConfig::new()", _optim(AdamW, lr=0.01),
          hypotheses=(_default("burn's AdamWConfig defaults to epsilon 1e-5 and weight decay 1e-4; PyTorch's AdamW to "
                               "eps 1e-8 and weight_decay 0.01",
                               "AdamWConfig::new().with_epsilon(1e-8).with_weight_decay(0.01)",
                               _burn_adam(lr=0.01, eps=1e-5, weight_decay=1e-4, decoupled=True)),)),
    # RMSprop
    _case("rmsprop/default", "RMSprop(lr=0.01)", _optim(RMSprop, lr=0.01)),
    _case("rmsprop/alpha", "RMSprop(lr=0.01, alpha=0.9)", _optim(RMSprop, lr=0.01, alpha=0.9)),
    _case("rmsprop/centered", "RMSprop(lr=0.01, centered=True)", _optim(RMSprop, lr=0.01, centered=True)),
    _case("rmsprop/momentum", "RMSprop(lr=0.01, momentum=0.5)", _optim(RMSprop, lr=0.01, momentum=0.5)),
    _case("rmsprop/weight-decay", "RMSprop(lr=0.01, weight_decay=0.1)", _optim(RMSprop, lr=0.01, weight_decay=0.1)),
    _case("rmsprop/burn-default", "RMSprop(lr=0.01); burn: RmsPropConfig::new().with_momentum(0.0)",
          _optim(RMSprop, lr=0.01),
          hypotheses=(_default("burn's RmsPropConfig epsilon defaults to 1e-5; PyTorch's RMSprop eps to 1e-8",
                               "RmsPropConfig::new().with_momentum(0.0).with_epsilon(1e-8)",
                               _optim(RMSprop, lr=0.01, eps=1e-5)),)),
    # burn's momentum 0.9 keeps a momentum_buffer PyTorch's RMSprop(momentum=0) has not: the traces differ in structure
    _case("rmsprop/burn-default-momentum", "RMSprop(lr=0.01); burn: RmsPropConfig::new()", _optim(RMSprop, lr=0.01),
          hypotheses=(_default("burn's RmsPropConfig defaults to momentum 0.9 and epsilon 1e-5; PyTorch's RMSprop to "
                               "momentum 0 and eps 1e-8",
                               "RmsPropConfig::new().with_momentum(0.0).with_epsilon(1e-8)",
                               _optim(RMSprop, lr=0.01, momentum=0.9, eps=1e-5)),)),
    # Adagrad
    _case("adagrad/default", "Adagrad(lr=0.1)", _optim(Adagrad, lr=0.1)),
    _case("adagrad/lr-decay", "Adagrad(lr=0.1, lr_decay=0.1)", _optim(Adagrad, lr=0.1, lr_decay=0.1)),
    _case("adagrad/eps", "Adagrad(lr=0.1, eps=1e-3)", _optim(Adagrad, lr=0.1, eps=1e-3)),
    _case("adagrad/weight-decay", "Adagrad(lr=0.1, weight_decay=0.1)", _optim(Adagrad, lr=0.1, weight_decay=0.1)),
    _case("adagrad/initial-accumulator", "Adagrad(lr=0.1, initial_accumulator_value=0.1); burn: no such setting",
          _optim(Adagrad, lr=0.1, initial_accumulator_value=0.1),
          hypotheses=(Hypothesis("framework", "burn's AdaGrad has no initial_accumulator_value: its sum of squared "
                                 "gradients starts at 0", optimizer=_optim(Adagrad, lr=0.1)),)),
    _case("adagrad/burn-default", "Adagrad(lr=0.1); burn: AdaGradConfig::new()", _optim(Adagrad, lr=0.1),
          hypotheses=(_default("burn's AdaGradConfig epsilon defaults to 1e-5; PyTorch's Adagrad eps to 1e-10",
                               "AdaGradConfig::new().with_epsilon(1e-10)", _optim(Adagrad, lr=0.1, eps=1e-5)),)),
    # Adafactor
    _case("adafactor/default", "Adafactor(params), defaults", _optim(torch.optim.Adafactor)),
    _case("adafactor/weight-decay", "Adafactor(lr=0.01, weight_decay=0.1)",
          _optim(torch.optim.Adafactor, lr=0.01, weight_decay=0.1)),
    _case("adafactor/settings", "Adafactor(lr=0.01, beta2_decay=-0.5, eps=(None, 1e-2), d=2)",
          _optim(torch.optim.Adafactor, lr=0.01, beta2_decay=-0.5, eps=(None, 1e-2), d=2.0)),
    # Muon (2-D parameters only: no bias). PyTorch's [4, 5] weight is burn's [5, 4]: Linear keeps [in, out]
    _case("muon/default", "Muon(params), defaults; Linear(5, 4) without bias", _optim(torch.optim.Muon), bias=False,
          hypotheses=(Hypothesis(
              "framework", "burn's Linear keeps its weight as [in, out], so Muon's 'original' lr adjustment "
              "sqrt(max(1, A/B)) reads PyTorch's [4, 5] weight as [5, 4]: burn steps sqrt(5/4) times PyTorch's lr "
              "(weight decay unscaled); and its Newton-Schulz runs in f32, PyTorch's in bfloat16 (burn-muon)",
              fix="a weight whose in- and out-features agree, or adjust_lr_fn match_rms_adamw (symmetric in A, B)",
              optimizer=_burn_muon(lr=1e-3 * math.sqrt(5 / 4), weight_decay=0.1 / math.sqrt(5 / 4))),)),
    _case("muon/square", "Muon(params), defaults; Linear(4, 4) without bias", _optim(torch.optim.Muon), inputs=4,
          bias=False),
    _case("muon/no-nesterov", "Muon(lr=0.02, nesterov=False); Linear(4, 4)",
          _optim(torch.optim.Muon, lr=0.02, nesterov=False), inputs=4, bias=False),
    _case("muon/match-rms-adamw", "Muon(lr=0.02, ns_steps=3, adjust_lr_fn='match_rms_adamw'); Linear(5, 4)",
          _optim(torch.optim.Muon, lr=0.02, ns_steps=3, adjust_lr_fn="match_rms_adamw"), bias=False),
    _case("muon/burn-default", "Muon(lr=0.02); burn: MuonConfig::new(); Linear(4, 4)",
          _optim(torch.optim.Muon, lr=0.02),
          inputs=4, bias=False,
          hypotheses=(_default("burn's MuonConfig has no weight decay by default; PyTorch's Muon weight_decay is 0.1",
                               "MuonConfig::new().with_weight_decay(Some(WeightDecayConfig::new(0.1)))",
                               _burn_muon(lr=0.02, weight_decay=0.0)),)),
    # L-BFGS (burn side: a loop written call by call, Training refuses L-BFGS)
    _case("lbfgs/default", "LBFGS(params), defaults", _optim(torch.optim.LBFGS)),
    _case("lbfgs/max-iter-history", "LBFGS(lr=0.5, max_iter=4, history_size=3)",
          _optim(torch.optim.LBFGS, lr=0.5, max_iter=4, history_size=3)),
    _case("lbfgs/strong-wolfe", "LBFGS(lr=1, max_iter=5, history_size=10, line_search_fn='strong_wolfe')",
          _optim(torch.optim.LBFGS, lr=1, max_iter=5, history_size=10, line_search_fn="strong_wolfe")),
]

"""Linear, the norms, and the first activations: the suite's smallest cases (CI runs some of them)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from burnside.conformance.case import Case, Hypothesis

CASES = [
    Case("linear/bias", "nn.Linear(6, 5)", lambda: nn.Linear(6, 5), (4, 6), ci=True),
    Case("linear/no-bias", "nn.Linear(6, 5, bias=False), 3-D input", lambda: nn.Linear(6, 5, bias=False), (2, 3, 6)),
    Case("layer_norm/default", "nn.LayerNorm(16), defaults", lambda: nn.LayerNorm(16), (2, 3, 16), ci=True),
    Case("rms_norm/default", "nn.RMSNorm(16), defaults", lambda: nn.RMSNorm(16), (2, 3, 16), ci=True,
         hypotheses=(Hypothesis("default", "burn's RmsNormConfig epsilon defaults to 1e-5; "
                                "PyTorch's nn.RMSNorm eps=None "
                                "uses torch.finfo(float32).eps (1.19e-7)",
                                lambda layer: _with_eps(layer, 1e-5),
                                "RmsNormConfig::new(d).with_epsilon(f32::EPSILON as f64)"),)),
    Case("cross_entropy/default", "F.cross_entropy(logits, y)", lambda: None, (6, 5),
         batch=lambda g: {"y": torch.randint(0, 5, (6,), generator=g)},
         loss=lambda out, batch: F.cross_entropy(out, batch["y"]), loss_name="cross_entropy", ci=True),
    Case("gelu/default", "nn.GELU()", lambda: nn.GELU(), (4, 8)),
]


def _with_eps(layer: nn.Module, eps: float) -> nn.Module:
    layer.eps = eps
    return layer

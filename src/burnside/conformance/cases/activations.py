"""Every burn-nn activation module with a PyTorch twin, and softmax / log-softmax / softmin (burn has them as
functions of `burn::tensor::activation` only). Inputs are scaled so the interesting regions are hit: negative
values, the kinks of the piecewise activations, and the large values where softplus switches to the identity.
"""

from __future__ import annotations

import torch
from torch import nn

from burnside.conformance.case import Case, Hypothesis


class _OnnxHardSigmoid(nn.Module):
    """``clamp(alpha * x + beta, 0, 1)``: ONNX's HardSigmoid, burn's `HardSigmoid` (PyTorch's nn.Hardsigmoid is
    the same with alpha = 1/6)."""

    def __init__(self, alpha: float, beta: float) -> None:
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.alpha * x + self.beta, 0.0, 1.0)


CASES = [
    Case("relu/default", "nn.ReLU()", lambda: nn.ReLU(), (4, 8), x_scale=3.0),
    Case("relu6/default", "nn.ReLU6(), inputs past 6", lambda: nn.ReLU6(), (4, 8), x_scale=4.0),
    Case("leaky_relu/default", "nn.LeakyReLU(), defaults", lambda: nn.LeakyReLU(), (4, 8), x_scale=3.0),
    Case("leaky_relu/slope0.2", "nn.LeakyReLU(0.2)", lambda: nn.LeakyReLU(0.2), (4, 8), x_scale=3.0),
    Case("prelu/default", "nn.PReLU(), one weight", lambda: nn.PReLU(), (4, 8), x_scale=3.0),
    Case("prelu/channels3", "nn.PReLU(3), a weight per channel of a (2, 3, 5) input", lambda: nn.PReLU(3),
         (2, 3, 5), x_scale=3.0),
    Case("elu/default", "nn.ELU(), defaults", lambda: nn.ELU(), (4, 8), x_scale=3.0),
    Case("elu/alpha0.5", "nn.ELU(alpha=0.5)", lambda: nn.ELU(alpha=0.5), (4, 8), x_scale=3.0),
    Case("celu/default", "nn.CELU(), defaults", lambda: nn.CELU(), (4, 8), x_scale=3.0),
    Case("celu/alpha2", "nn.CELU(alpha=2.0)", lambda: nn.CELU(alpha=2.0), (4, 8), x_scale=3.0),
    Case("selu/default", "nn.SELU()", lambda: nn.SELU(), (4, 8), x_scale=3.0),
    Case("gelu/tanh", "nn.GELU(approximate='tanh')", lambda: nn.GELU(approximate="tanh"), (4, 8), x_scale=3.0),
    Case("gelu/module", "nn.GELU() (burn's Gelu module), wide inputs", lambda: nn.GELU(), (4, 8), x_scale=3.0),
    Case("silu/default", "nn.SiLU()", lambda: nn.SiLU(), (4, 8), x_scale=3.0),
    Case("mish/default", "nn.Mish()", lambda: nn.Mish(), (4, 8), x_scale=3.0),
    Case("sigmoid/default", "nn.Sigmoid()", lambda: nn.Sigmoid(), (4, 8), x_scale=3.0),
    Case("tanh/default", "nn.Tanh()", lambda: nn.Tanh(), (4, 8), x_scale=3.0),
    Case("log_sigmoid/default", "nn.LogSigmoid(), inputs to +-30", lambda: nn.LogSigmoid(), (4, 8), x_scale=10.0),
    Case("hard_sigmoid/default", "nn.Hardsigmoid() against burn's HardSigmoidConfig::new(), defaults",
         lambda: nn.Hardsigmoid(), (4, 8), x_scale=3.0,
         hypotheses=(Hypothesis("default", "burn's HardSigmoidConfig defaults to ONNX's alpha 0.2 (clamp(0.2 x + 0.5, "
                                "0, 1)); PyTorch's nn.Hardsigmoid is clamp(x / 6 + 0.5, 0, 1)",
                                lambda layer: _OnnxHardSigmoid(0.2, 0.5),
                                "HardSigmoidConfig::new().with_alpha(1.0 / 6.0)"),)),
    Case("hard_sigmoid/alpha-sixth", "nn.Hardsigmoid() against HardSigmoidConfig::new().with_alpha(1/6)",
         lambda: nn.Hardsigmoid(), (4, 8), x_scale=3.0),
    Case("hard_swish/default", "nn.Hardswish()", lambda: nn.Hardswish(), (4, 8), x_scale=3.0),
    Case("hardtanh/default", "nn.Hardtanh(), defaults", lambda: nn.Hardtanh(), (4, 8), x_scale=3.0),
    Case("hardtanh/min-2-max3", "nn.Hardtanh(-2.0, 3.0)", lambda: nn.Hardtanh(-2.0, 3.0), (4, 8), x_scale=3.0),
    Case("softplus/default", "nn.Softplus(), defaults, inputs past the threshold 20", lambda: nn.Softplus(), (4, 8),
         x_scale=10.0),
    Case("softplus/beta2-threshold5", "nn.Softplus(beta=2.0, threshold=5.0)",
         lambda: nn.Softplus(beta=2.0, threshold=5.0), (4, 8), x_scale=3.0),
    Case("softsign/default", "nn.Softsign()", lambda: nn.Softsign(), (4, 8), x_scale=3.0),
    Case("tanhshrink/default", "nn.Tanhshrink()", lambda: nn.Tanhshrink(), (4, 8), x_scale=3.0),
    Case("hard_shrink/default", "nn.Hardshrink(), defaults", lambda: nn.Hardshrink(), (4, 8)),
    Case("hard_shrink/lambda1.5", "nn.Hardshrink(1.5)", lambda: nn.Hardshrink(1.5), (4, 8), x_scale=3.0),
    Case("soft_shrink/default", "nn.Softshrink(), defaults", lambda: nn.Softshrink(), (4, 8)),
    Case("soft_shrink/lambda1", "nn.Softshrink(1.0)", lambda: nn.Softshrink(1.0), (4, 8), x_scale=3.0),
    Case("threshold/default", "nn.Threshold(0.5, -2.0)", lambda: nn.Threshold(0.5, -2.0), (4, 8), x_scale=3.0),
    Case("glu/default", "nn.GLU(), the last dim halved", lambda: nn.GLU(), (4, 8), x_scale=3.0),
    Case("glu/dim1", "nn.GLU(dim=1) of a (2, 6, 3) input", lambda: nn.GLU(dim=1), (2, 6, 3), x_scale=3.0),
    Case("softmax/last", "nn.Softmax(dim=-1) (burn: activation::softmax)", lambda: nn.Softmax(dim=-1), (4, 8),
         x_scale=3.0),
    Case("softmax/dim0", "nn.Softmax(dim=0) of a (5, 3, 4) input", lambda: nn.Softmax(dim=0), (5, 3, 4),
         x_scale=3.0),
    Case("log_softmax/last", "nn.LogSoftmax(dim=-1) (burn: activation::log_softmax), wide inputs",
         lambda: nn.LogSoftmax(dim=-1), (4, 8), x_scale=10.0),
    Case("log_softmax/dim1", "nn.LogSoftmax(dim=1) of a (2, 5, 3) input", lambda: nn.LogSoftmax(dim=1), (2, 5, 3),
         x_scale=3.0),
    Case("softmin/last", "nn.Softmin(dim=-1) (burn: activation::softmin)", lambda: nn.Softmin(dim=-1), (4, 8),
         x_scale=3.0),
]

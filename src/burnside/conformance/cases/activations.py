"""Every burn-nn activation module with a PyTorch twin, and softmax / log-softmax / softmin (burn has them as
functions of `burn::tensor::activation` only). Inputs are scaled so the interesting regions are hit: negative
values, the kinks of the piecewise activations, and the large values where softplus switches to the identity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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


def _closed_clamp(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """``clamp(x, low, high)`` whose gradient is 1 on the closed interval, bounds included (burn's clamp);
    torch.clamp's gradient is 0 at the bounds."""
    return torch.where((x >= low) & (x <= high), x, torch.clamp(x, low, high).detach())


class _Clamp(nn.Module):
    """burn's Hardtanh and ReLU6: a clamp with gradient 1 at its bounds."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.low, self.high = low, high

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _closed_clamp(x, self.low, self.high)


class _ClampedHardSigmoid(nn.Module):
    """burn's HardSigmoid: ``clamp(alpha * x + beta, 0, 1)``, the clamp's gradient taken at its bounds."""

    def __init__(self, alpha: float, beta: float) -> None:
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _closed_clamp(self.alpha * x + self.beta, 0.0, 1.0)


class _ClampedHardSwish(nn.Module):
    """burn's hard_swish: ``x * clamp(x / 6 + 0.5, 0, 1)``, the clamp's gradient taken at its bounds."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * _closed_clamp(x / 6 + 0.5, 0.0, 1.0)


class _LeakyAtZero(nn.Module):
    """``x`` where ``x >= 0``, else ``slope * x``: the linear branch taken at 0 (burn's leaky_relu and prelu).
    ``slope`` is a float or the layer's own ``weight`` parameter (PReLU, one per channel, dim 1)."""

    def __init__(self, slope: float | nn.Parameter) -> None:
        super().__init__()
        if isinstance(slope, nn.Parameter):
            self.weight = slope
        else:
            self.slope = slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        slope = getattr(self, "weight", None)
        if slope is None:
            slope = self.slope
        elif slope.numel() > 1:
            slope = slope.reshape(1, -1, *([1] * (x.dim() - 2)))
        return torch.where(x >= 0, x, slope * x)


class _SeluPositiveAtZero(nn.Module):
    """SELU with its linear branch taken at 0 (burn's selu: ``x >= 0``); PyTorch's takes the exponential one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        return torch.where(x >= 0, scale * x, scale * alpha * (torch.exp(x) - 1))


class _EvalRReLU(nn.RReLU):
    """nn.RReLU as in ``model.eval()``: the fixed slope (lower + upper) / 2 (the harness trains in training
    mode, where the slopes are random)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rrelu(x, self.lower, self.upper, training=False)


def _snapped(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to a multiple of 0.5 (exactly, in float32 and float64), its gradient passed straight
    through: the kinks cases feed an activation values exactly at its kinks (0, +-0.5, +-1, +-3, 6), where
    each framework picks its own one-sided derivative. Exact zeros are common in a model (a ReLU's output fed
    to another activation, zero padding)."""
    return x + (torch.round(2 * x) / 2 - x).detach()


def _kinks(id: str, title: str, layer, shape: tuple[int, ...] = (8, 16), **kw) -> Case:
    return Case(id, f"{title} of inputs at its kinks (rounded to multiples of 0.5, gradient straight through)",
                layer, shape, call=lambda layer_, x, batch: layer_(_snapped(x)), x_scale=3.0, **kw)


CASES = [
    Case("relu/default", "nn.ReLU()", lambda: nn.ReLU(), (4, 8), x_scale=3.0),
    Case("relu6/default", "nn.ReLU6(), inputs past 6", lambda: nn.ReLU6(), (4, 8), x_scale=4.0),
    Case("leaky_relu/default", "nn.LeakyReLU(), defaults", lambda: nn.LeakyReLU(), (4, 8), x_scale=3.0),
    Case("leaky_relu/slope0.2", "nn.LeakyReLU(0.2)", lambda: nn.LeakyReLU(0.2), (4, 8), x_scale=3.0),
    Case("prelu/default", "nn.PReLU(), one weight", lambda: nn.PReLU(), (4, 8), x_scale=3.0),
    Case("prelu/channels3", "nn.PReLU(3), a weight per channel of a (2, 3, 5) input", lambda: nn.PReLU(3),
         (2, 3, 5), x_scale=3.0),
    Case("prelu/channels4-2d", "nn.PReLU(4) of a (5, 4) input (channels the last dim)", lambda: nn.PReLU(4), (5, 4),
         x_scale=3.0),
    Case("prelu/channels3-4d", "nn.PReLU(3) of a (2, 3, 2, 2) input", lambda: nn.PReLU(3), (2, 3, 2, 2), x_scale=3.0),
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
    Case("softplus/threshold200", "nn.Softplus(threshold=200.0), inputs to +-110 (float32 exp overflows past 88)",
         lambda: nn.Softplus(threshold=200.0), (4, 8), x_scale=60.0),
    Case("log_sigmoid/wide", "nn.LogSigmoid(), inputs to +-100", lambda: nn.LogSigmoid(), (4, 8), x_scale=40.0),
    Case("sigmoid/wide", "nn.Sigmoid(), inputs to +-40", lambda: nn.Sigmoid(), (4, 8), x_scale=15.0),
    Case("tanh/wide", "nn.Tanh(), inputs to +-25", lambda: nn.Tanh(), (4, 8), x_scale=10.0),
    Case("silu/wide", "nn.SiLU(), inputs to +-100", lambda: nn.SiLU(), (4, 8), x_scale=40.0),
    Case("mish/wide", "nn.Mish(), inputs to +-100", lambda: nn.Mish(), (4, 8), x_scale=40.0),
    Case("gelu/tanh-wide", "nn.GELU(approximate='tanh'), inputs to +-25", lambda: nn.GELU(approximate="tanh"),
         (4, 8), x_scale=10.0),
    Case("elu/wide", "nn.ELU(), inputs to +-100", lambda: nn.ELU(), (4, 8), x_scale=40.0),
    Case("softmax/wide", "nn.Softmax(dim=-1), inputs to +-100 (exp overflows without the max subtracted)",
         lambda: nn.Softmax(dim=-1), (4, 8), x_scale=40.0),
    Case("log_softmax/wide", "nn.LogSoftmax(dim=-1), inputs to +-100", lambda: nn.LogSoftmax(dim=-1), (4, 8),
         x_scale=40.0),
    Case("softmin/wide", "nn.Softmin(dim=-1), inputs to +-100", lambda: nn.Softmin(dim=-1), (4, 8), x_scale=40.0),
    Case("rrelu/eval", "nn.RReLU() evaluated (slope (lower + upper) / 2); burn: RRelu with training off",
         lambda: _EvalRReLU(), (4, 8), x_scale=3.0),
    Case("rrelu/train", "nn.RReLU() in training mode", lambda: nn.RReLU(), (4, 8),
         not_comparable="in training mode both draw each negative input's slope from Uniform(lower, upper) with "
                        "their own random generator (burn's RRelu on an autodiff device): the slopes never match"),
    _kinks("relu/kinks", "nn.ReLU()", lambda: nn.ReLU()),
    _kinks("relu6/kinks", "nn.ReLU6()", lambda: nn.ReLU6(),
           hypotheses=(Hypothesis("framework", "burn's ReLU6 is clamp(x, 0, 6), whose gradient is 1 at x = 0 and "
                                  "x = 6; PyTorch's nn.ReLU6 gives 0 there", lambda layer: _Clamp(0.0, 6.0)),)),
    _kinks("leaky_relu/kinks", "nn.LeakyReLU(0.2)", lambda: nn.LeakyReLU(0.2),
           hypotheses=(Hypothesis("framework", "burn's leaky_relu takes the identity branch at x = 0 (x < 0 is "
                                  "scaled): gradient 1 there; PyTorch's is negative_slope (only x > 0 passes)",
                                  lambda layer: _LeakyAtZero(layer.negative_slope)),)),
    _kinks("prelu/kinks", "nn.PReLU()", lambda: nn.PReLU(),
           hypotheses=(Hypothesis("framework", "burn's prelu takes the identity branch at x = 0: gradient 1 there; "
                                  "PyTorch's is the weight (only x > 0 passes)",
                                  lambda layer: _LeakyAtZero(layer.weight)),)),
    _kinks("elu/kinks", "nn.ELU(alpha=0.5)", lambda: nn.ELU(alpha=0.5)),
    _kinks("celu/kinks", "nn.CELU(alpha=2.0)", lambda: nn.CELU(alpha=2.0)),
    _kinks("selu/kinks", "nn.SELU()", lambda: nn.SELU(),
           hypotheses=(Hypothesis("framework", "burn's selu takes the linear branch at x = 0 (x >= 0): gradient "
                                  "scale = 1.0507 there; PyTorch's takes the exponential one, scale * alpha = 1.7581 "
                                  "(burn's own elu and celu do too)", lambda layer: _SeluPositiveAtZero()),)),
    _kinks("hardtanh/kinks", "nn.Hardtanh()", lambda: nn.Hardtanh(),
           hypotheses=(Hypothesis("framework", "burn's Hardtanh is clamp(x, min_val, max_val), whose gradient is 1 "
                                  "at the bounds; PyTorch's nn.Hardtanh gives 0 there",
                                  lambda layer: _Clamp(layer.min_val, layer.max_val)),)),
    _kinks("hard_sigmoid/kinks", "nn.Hardsigmoid() (burn: alpha 1/6)", lambda: nn.Hardsigmoid(),
           hypotheses=(Hypothesis("framework", "burn's hard_sigmoid is clamp(alpha x + beta, 0, 1), whose gradient is "
                                  "alpha at x = -3 and x = 3; PyTorch's nn.Hardsigmoid gives 0 there",
                                  lambda layer: _ClampedHardSigmoid(1 / 6, 0.5)),)),
    _kinks("hard_swish/kinks", "nn.Hardswish()", lambda: nn.Hardswish(),
           hypotheses=(Hypothesis("framework", "burn's hard_swish is x * clamp(x / 6 + 0.5, 0, 1), the clamp's "
                                  "gradient taken at its bounds: d/dx is -0.5 at x = -3 and 1.5 at x = 3; PyTorch's "
                                  "nn.Hardswish gives 0 and 1", lambda layer: _ClampedHardSwish()),)),
    _kinks("hard_shrink/kinks", "nn.Hardshrink()", lambda: nn.Hardshrink()),
    _kinks("soft_shrink/kinks", "nn.Softshrink()", lambda: nn.Softshrink()),
    _kinks("threshold/kinks", "nn.Threshold(0.5, -2.0)", lambda: nn.Threshold(0.5, -2.0)),
    _kinks("softsign/kinks", "nn.Softsign()", lambda: nn.Softsign()),
    _kinks("tanhshrink/kinks", "nn.Tanhshrink()", lambda: nn.Tanhshrink()),
]

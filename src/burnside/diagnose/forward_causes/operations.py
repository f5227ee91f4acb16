"""A parameterless PyTorch module (an activation, a pooling) whose output B's captured graph makes with an operation of
another kind: the port leaves it out."""

from __future__ import annotations

from burnside.compare import Comparison


#: The burn code that applies a parameterless PyTorch module, by class.
_BURN_OP = {
    "ReLU": "burn::tensor::activation::relu(x)", "GELU": "burn::tensor::activation::gelu(x)",
    "SiLU": "burn::tensor::activation::silu(x)", "Sigmoid": "burn::tensor::activation::sigmoid(x)",
    "Tanh": "burn::tensor::activation::tanh(x)", "LeakyReLU": "burn::tensor::activation::leaky_relu(x, slope)",
    "Softmax": "burn::tensor::activation::softmax(x, dim)",
    "MaxPool2d": "`MaxPool2dConfig::new(kernel).init().forward(x)`",
    "AvgPool2d": "`AvgPool2dConfig::new(kernel).init().forward(x)`",
}


def operation_missing(comparison: Comparison, first, kind: str | None, module: str) -> tuple[str, str] | None:
    """A port recorded by graph capture: the first diverging module is a parameterless one (an activation, a pooling)
    and the operation of B's that stands for its output is of another kind (an Add where A applies a ReLU): B does
    not apply it there."""
    from burnside.compare.aligned import _OP_KINDS
    b_kind = comparison.captured_kinds.get(first.name)
    expected = _OP_KINDS.get(kind or "")
    if not b_kind or not expected or b_kind in expected:
        return None
    return (
        f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}); in {comparison.side_name('b')}'s captured graph "
        f"the tensor at {module} ({kind}) comes from {_article(b_kind)} {b_kind}, "
        f"and no {'/'.join(expected)} is applied to it: the "
        f"port leaves the {kind} out there",
        f"apply the {kind} where the PyTorch model does ({_BURN_OP.get(kind, kind)} on the {b_kind}'s result, e.g. "
        "`relu(x + identity)` for a residual block's tail)" if kind == "ReLU" else
        f"apply the {kind} where the PyTorch model does ({_BURN_OP.get(kind, kind)} on the {b_kind}'s result)")


def _article(word: str) -> str:
    return "an" if word[:1].upper() in "AEIOU" else "a"

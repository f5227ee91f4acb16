"""A layer's settings, measured from each side's tensors at one step (`measure_layer`).

compare measures the layer of a row its float64 referee calls noise when one side is far further off than the
other (`overruled_noise`); forensics the layer at the first divergence (D011, D010 read it). Only one layer is
measured, at that one step. Its input is what A
recorded feeding it (`step{k}.layer_inputs.{module}`, a forward trace from
`burnside.torch.record_forward`), wherever the layer sits; without it, the activation recorded just
before it in A's execution order (metadata `activations`), which is its input only when the model is
sequential there. Side B is measured from its own recorded input when it has one; a burn port's
trace has none, and B's layer is then measured from A's recorded input, which is what B's layer
receives when everything before it agrees (the first divergence is there). Each measurement is
first validated on side A: the layer's formula with A's measured setting must reproduce A's own
output to near rounding (`layer_fit.VALID`), otherwise nothing is measured (a residual connection
feeds the layer and its input is not recorded).

The formulas: BatchNorm, LayerNorm, GroupNorm, RMSNorm, InstanceNorm, GELU and the other elementwise activations
(torch's, Hugging Face's `ACT2FN` classes: `norms.ACTIVATIONS`) and PReLU in `norms`,
LSTM and GRU re-run in `recurrent`, Conv1d and Conv2d in `conv`, MaxPool and AvgPool (1d, 2d) in `pool`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from burnside.compare.layers import conv, norms, pool, recurrent
from burnside.compare.layers.layer_fit import FLOATS, Fit
from burnside.trace import Trace, parse_name

_KINDS = (*norms.KINDS, *recurrent.KINDS, *conv.KINDS, *pool.KINDS)
#: Settings another rule names: D015 names BatchNorm's statistics (training mode on one side).
OWN_RULE = ("statistics",)


@dataclass
class LayerForensics:
    """One layer's settings as each side's own tensors show them, at one step."""

    module: str  # `bn`, `mlp.act`
    kind: str  # A's class of it: `BatchNorm2d`, `LayerNorm`, `GELU`
    step: int
    input: str  # the tensor read as the layer's input: its `layer_inputs`, or the activation before it
    #: side ("a", "b") -> setting -> value: `epsilon`, `momentum` (floats), `gelu` ("erf" or "tanh", or another
    #: form of `norms.FORMS` in a GELU's place), `activation` (the form of another activation module: "silu", ...),
    #: `layout` ("seq-first" or "batch-first"), `statistics` ("batch" or "running", BatchNorm),
    #: `groups` (GroupNorm), `stride`, `padding`, `dilation` (convolutions: "2" or "(2, 1)"), `affine`
    #: (a norm's parameters: "weight and bias", "weight only", "none"), `pool` (a pooling layer's kind, window,
    #: stride and padding: "max, window 2x2, stride 2, padding 0"), `normalised_by` (InstanceNorm:
    #: "each sample" or "running statistics"), `slopes` (PReLU: "one" or "per channel (C)"), `slope`
    measured: dict[str, dict[str, float | str]] = field(default_factory=dict)
    #: side -> what -> relative residual of the formula: `epsilon`/`momentum` with the side's measured
    #: value, `erf`/`tanh` for each GELU form, `seq-first`/`batch-first` for each reading; on B also
    #: `epsilon_at_a`/`momentum_at_a`, B's own
    #: tensors with A's measured value
    residuals: dict[str, dict[str, float]] = field(default_factory=dict)
    #: B's layer was measured from A's recorded input (B's trace records none)
    input_from_a: bool = False
    #: the activation recorded before the layer in A's execution order (`wpe`), when its input is a
    #: recorded `layer_inputs`, and whether that input is that activation's output, bit for bit (False: the
    #: layer reads something computed after it, a sum of embeddings, a residual)
    before: str | None = None
    input_is_before: bool | None = None

    def differing(self) -> list[tuple[str, float | str, float | str]]:
        """(setting, A's value, B's value) for each setting measured on both sides that differs: the
        values are apart, and A's value misses B's tensors by over 10 times B's own value (a
        difference within the fit's own resolution is none)."""
        a, b = self.measured.get("a", {}), self.measured.get("b", {})
        fits = self.residuals.get("b", {})
        if a.get("statistics", "") != b.get("statistics", ""):
            # a BatchNorm normalising with other statistics on each side: its epsilons are not comparable
            return [("statistics", a["statistics"], b["statistics"])] if "statistics" in a and "statistics" in b else []
        return [(key, a[key], b[key]) for key in a
                if key in b and _differs(key, a[key], b[key])
                and (isinstance(a[key], str) or fits.get(f"{key}_at_a", math.inf) > 10 * fits.get(key, 0.0))]

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "kind": self.kind, "step": self.step, "input": self.input,
                "input_from_a": self.input_from_a, "before": self.before, "input_is_before": self.input_is_before,
                "measured": self.measured, "residuals": self.residuals,
                "differing": [list(d) for d in self.differing()]}


def _differs(key: str, a: float | str, b: float | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a != b
    if key == "epsilon":
        # measured to ~1% of 1e-5 on the examples; settings that matter differ by factors
        return abs(a - b) > 0.25 * max(abs(a), abs(b))
    return abs(a - b) > 0.01 + 0.05 * max(abs(a), abs(b))  # momentum: measured to 1e-6


def _input_name(a: Trace, step: int, module: str) -> str | None:
    recorded = f"step{step}.layer_inputs.{module}"
    if recorded in a:
        return recorded
    order = a.metadata.get("activations")
    if not isinstance(order, list) or module not in order:
        return None
    i = order.index(module)
    if i > 0:
        return f"step{step}.activations.{order[i - 1]}"
    # the first layer reads the model's input: the one float input (labels are integers)
    inputs = [n for n in a.names if n.startswith(f"step{step}.inputs.") and a.info(n).dtype in FLOATS]
    return inputs[0] if len(inputs) == 1 else None


def _reads_before(a: Trace, k: int, module: str, source: str) -> tuple[str | None, bool | None]:
    """The activation before ``module`` in A's execution order, and whether A's recorded input of the
    layer (``source``) is exactly its output."""
    order = a.metadata.get("activations")
    if not isinstance(order, list) or module not in order or order.index(module) == 0:
        return None, None
    before = order[order.index(module) - 1]
    name = f"step{k}.activations.{before}"
    if name not in a:
        return before, None
    if a.info(name).shape != a.info(source).shape or a.info(name).dtype != a.info(source).dtype:
        return before, False
    same = bool(np.array_equal(np.asarray(a.values(name)), np.asarray(a.values(source)), equal_nan=True))
    a.release(name)
    a.release(source)
    return before, same


def measure_layer(a: Trace, b: Trace, first: str) -> LayerForensics | None:
    """Measure the layer at the first divergence ``first`` on both sides, or None.

    None when that row is not a BatchNorm's, LayerNorm's, GroupNorm's, RMSNorm's, InstanceNorm's, GELU's,
    PReLU's, LSTM's, GRU's, Conv1d's or Conv2d's output (or a BatchNorm's running statistic), when its input is
    not recorded on A, or when
    A's own output is not reproduced from that input by the layer's formula with any setting.
    """
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or not isinstance(modules, dict):
        return None
    k = parsed.step
    if parsed.stage == "activations":
        module = parsed.rest
    elif parsed.stage == "buffers" and parsed.rest.rsplit(".", 1)[-1] in ("running_mean", "running_var"):
        module = parsed.rest.rsplit(".", 1)[0]
    else:
        return None
    kind = modules.get(module)
    # a model's own RMSNorm class (Hugging Face's LlamaRMSNorm, Qwen2RMSNorm, ...) is measured as torch's
    measured_as = norms.RMSNORM if isinstance(kind, str) and kind.endswith("RMSNorm") else kind
    if measured_as not in _KINDS:
        return None
    source = _input_name(a, k, module)
    if source is None:
        return None
    result = LayerForensics(module, kind, k, source)
    result.input_from_a = source not in b and parse_name(source).stage == "layer_inputs"
    if parse_name(source).stage == "layer_inputs":
        result.before, result.input_is_before = _reads_before(a, k, module, source)
    for side, trace in (("a", a), ("b", b)):
        inputs = a if side == "b" and result.input_from_a else trace
        measured: dict[str, float | str] = {}
        residuals: dict[str, float] = {}
        against = result.measured.get("a", {})
        with np.errstate(all="ignore"):  # a NaN or an overflow in a trace fails the fit, no more
            fit = Fit(measured, residuals, against)
            if kind in recurrent.KINDS:
                recurrent.measure_recurrent(trace, kind, module, k, source, fit, inputs)
            elif kind in conv.KINDS:
                conv.measure_conv(trace, kind, module, k, source, fit, inputs)
            elif kind in pool.KINDS:
                pool.measure_pool(trace, kind, module, k, source, fit, inputs)
            else:
                norms.measure_norm_or_activation(trace, measured_as, module, k, source, fit, inputs)
        if side == "a" and not measured:
            return None  # A's own layer is not reproduced from this input: not a sequential layer
        result.measured[side], result.residuals[side] = measured, residuals
    return result

"""D011 layer configured differently.

## What it does
When the first divergence is a BatchNorm's, LayerNorm's, GELU's, LSTM's or GRU's output (or
a BatchNorm's running statistics), measures that layer's settings on each side from that side's own
recorded tensors at that step: its input (the activation recorded before it), its output,
its weight and bias, its running mean before and after. BatchNorm and LayerNorm: the
epsilon that reproduces the output, BatchNorm's momentum from the running mean; GELU:
whether the exact erf form or the tanh approximation reproduces it; LSTM and GRU (one
layer, one or both directions): which axis the layer reads as time, from re-running it with
its own weights both ways. It names the settings
that differ, with both measured values. The measurement is only made when the layer's
formula reproduces side A's own output from that input (a sequential layer); a layer fed
by a residual connection is not measured, and the rule says nothing.

## Why is this bad?
burn's and PyTorch's layer defaults agree (epsilon 1e-5, momentum 0.1, exact GELU), but
ports copied from TensorFlow or Keras code carry their conventions: BatchNorm epsilon 1e-3,
a momentum of 0.9 or 0.99 that weighs the old running value where PyTorch's (and burn's)
weighs the batch, GELU's tanh approximation. PyTorch's `nn.LSTM` and `nn.GRU` read
`[seq, batch, features]` unless built with `batch_first=True`, burn's `Lstm` and `BiLstm`
`[batch, seq, features]` unless built with `with_batch_first(false)`: the shapes fit either
way and the layer runs over the wrong axis. The first forward already differs, or (a
momentum) only the running statistics that evaluation uses, and the difference is far
above rounding but small enough to pass for it in a loss curve.

## Example
```rust
let bn = BatchNormConfig::new(64).with_epsilon(1e-3).with_momentum(0.9).init(&device);
let ln = LayerNormConfig::new(512).with_epsilon(1e-6).init(&device);
let h = gelu_approximate(self.fc1.forward(x)); // PyTorch: nn.GELU()
let lstm = LstmConfig::new(32, 64, true).init(&device); // PyTorch: nn.LSTM(32, 64), [seq, batch, 32]
```

## Use instead
```rust
let bn = BatchNormConfig::new(64).with_epsilon(1e-5).with_momentum(0.1).init(&device);
let ln = LayerNormConfig::new(512).with_epsilon(1e-5).init(&device);
let h = gelu(self.fc1.forward(x)); // burn::tensor::activation::gelu: the exact erf form
let lstm = LstmConfig::new(32, 64, true).with_batch_first(false).init(&device);
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.forensics import evidence_of
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D011"
NAME = "layer-configured-differently"
TITLE = "layer configured differently"
SEVERITY = Severity.ERROR

_FORMS = {"erf": "the exact erf form", "tanh": "the tanh approximation",
          "seq-first": "reads [seq, batch, features] (time on the first axis)",
          "batch-first": "reads [batch, seq, features] (time on the second axis)"}


def _literal(value: float) -> str:
    """A measured setting as a short literal: 9.9899e-06 -> `1e-5`, 0.0999999 -> `0.1`."""
    text = f"{value:.2g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def _fix(kind: str, setting: str, wanted: float | str) -> str:
    if setting == "gelu":
        call = ("`burn::tensor::activation::gelu` (or `burn::nn::Gelu::new()`)" if wanted == "erf" else
                "`burn::tensor::activation::gelu_approximate` (or `burn::nn::Gelu::new_approximate()`)")
        return (f"use {_FORMS[str(wanted)]} of GELU, as side A does: {call}; PyTorch's `nn.GELU()` is the erf "
                "form, `nn.GELU(approximate='tanh')` the tanh one")
    if setting == "layout":
        config = "LstmConfig/BiLstmConfig"
        if wanted == "seq-first":
            return (f"run the {kind} over the first axis, as side A: `{config}::new(..).with_batch_first(false)` "
                    "(PyTorch's nn.LSTM and nn.GRU default to batch_first=False, burn's Lstm and BiLstm to true); "
                    "burn's Gru and BiGru read [batch, seq, features] only: `.swap_dims(0, 1)` before and after them")
        return (f"run the {kind} over the second axis, as side A (PyTorch's batch_first=True): burn's Lstm, BiLstm, "
                "Gru and BiGru read [batch, seq, features] by default; drop `with_batch_first(false)` or the "
                "`swap_dims(0, 1)` around the layer")
    value = _literal(float(wanted))
    if kind.startswith("BatchNorm") and setting == "momentum":
        return (f"build the {kind} with momentum {value}: `BatchNormConfig::new(channels).with_momentum({value})`; "
                "burn's momentum means what PyTorch's does, the weight of the batch statistic "
                "(running = (1 - momentum) * running + momentum * batch), while TensorFlow's and Keras' momentum "
                "(0.99) is the weight of the old running value: convert it as 1 - that")
    config = "BatchNormConfig::new(channels)" if kind.startswith("BatchNorm") else "LayerNormConfig::new(d_model)"
    return f"build the {kind} with epsilon {value}, as side A: `{config}.with_epsilon({value})`"


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis per layer setting that the two sides' own tensors show to differ."""
    layer = evidence_of(comparison).layer
    if layer is None:
        return []
    found = []
    a, b = comparison.side_name("a"), comparison.side_name("b")
    where = f"{layer.module} ({layer.kind}) at step {layer.step}"
    output = f"step{layer.step}.activations.{layer.module}"
    sources = {"momentum": f"from each side's own {layer.input} (the layer's input: its batch mean) and its "
                           f"running_mean before and after step {layer.step}",
               "epsilon": f"from each side's own {layer.input} (the layer's input), {output} and its weight and bias",
               "gelu": f"from each side's own {layer.input} (the layer's input) and {output}",
               "layout": f"by re-running the layer both ways on each side's own {layer.input} (the layer's input) "
                         f"with its own weights at step {layer.step}, against {output}"}
    formulas = {"epsilon": "the layer's formula", "momentum": "the running-mean update"}
    targets = {"epsilon": "B's output", "momentum": "B's running mean"}
    for setting, on_a, on_b in layer.differing():
        if setting in ("gelu", "layout"):
            res_a, res_b = layer.residuals["a"], layer.residuals["b"]
            evidence = (f"{where}: {a} computes {_FORMS[str(on_a)]} (relative residual {res_a[str(on_a)]:.2g}; "
                        f"the other form {res_a[str(on_b)]:.2g}), {b} {_FORMS[str(on_b)]} (residual "
                        f"{res_b[str(on_b)]:.2g}; the other form {res_b[str(on_a)]:.2g}), measured {sources[setting]}")
            if setting == "layout":
                evidence = (f"{where}: {a} {_FORMS[str(on_a)]} (relative residual {res_a[str(on_a)]:.2g}; the other "
                            f"reading {res_a[str(on_b)]:.2g}), {b} {_FORMS[str(on_b)]} (residual "
                            f"{res_b[str(on_b)]:.2g}; the other reading {res_b[str(on_a)]:.2g}), measured "
                            f"{sources[setting]}")
        else:
            res_a, res_b = layer.residuals["a"][setting], layer.residuals["b"][setting]
            evidence = (f"{where}: {setting} measured {_literal(float(on_a))} on {a}, {_literal(float(on_b))} on "
                        f"{b} (least-squares {float(on_a):.6g} and {float(on_b):.6g} {sources[setting]}; with them "
                        f"{formulas[setting]} reproduces each side within {max(res_a, res_b):.2g}, relative; "
                        f"{targets[setting]} with A's {setting} misses by "
                        f"{layer.residuals['b'][setting + '_at_a']:.2g})")
        found.append(Diagnosis(ID, TITLE, evidence, _fix(layer.kind, setting, on_a)))
    return found

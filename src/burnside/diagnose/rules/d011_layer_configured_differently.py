"""D011 layer configured differently.

## What it does
When the first divergence is a BatchNorm's, LayerNorm's, GroupNorm's, RMSNorm's, InstanceNorm's,
GELU's, PReLU's, LSTM's, GRU's, Conv1d's, Conv2d's, MaxPool's or AvgPool's output (or a BatchNorm's running
statistics), or a convolution's output
shape differs, measures that layer's settings on each side from the recorded tensors at that step:
its input, its output, its weight and bias, its running statistics. The input is what the PyTorch
side recorded feeding the layer (`layer_inputs`, a forward trace from
`burnside.torch.record_forward`), wherever the layer sits; B's layer is measured from that same
input when B's trace records none (the layers before agree, so B's layer received it); without
`layer_inputs`, the activation recorded before the layer. BatchNorm (with the statistics it
normalises by), LayerNorm, GroupNorm, RMSNorm and InstanceNorm: the epsilon that reproduces the
output (GroupNorm's number of groups too; InstanceNorm's statistics, each sample's own or the
running ones of `track_running_stats=True`), whether the side has a weight and bias for it
(`elementwise_affine=False`, `affine=False`), BatchNorm's momentum from the running mean; GELU:
whether the exact erf form or the tanh approximation reproduces it (or a SiLU, ReLU, quick GELU, sigmoid,
tanh or Mish in its place), and the same for every elementwise activation module: torch's SiLU, ReLU, Sigmoid,
Tanh and Mish, and Hugging Face's `ACT2FN` classes (`GELUActivation` is the erf form, `NewGELUActivation`,
`GELUTanh`, `FastGELUActivation` the tanh one, `QuickGELUActivation`, `SiLUActivation`, `MishActivation`); PReLU:
its slope, one shared
or one per channel; LSTM and GRU (one layer, one or both directions): which
axis the layer reads as time, from re-running it with its own weights both ways; Conv1d and
Conv2d: the stride, padding and dilation that give the output's shape, confirmed by re-running the
convolution with its own weights; MaxPool and AvgPool: which pooling, over which window, stride and
padding, reproduces the output. It names the settings that differ, with both measured values.
The measurement is only made when the layer's formula reproduces side A's own output from that
input; a layer fed by a residual connection whose input is not recorded is not measured, and the
rule says nothing.

## Why is this bad?
burn's and PyTorch's layer defaults mostly agree (epsilon 1e-5, momentum 0.1, exact GELU, PReLU's
0.25), but not everywhere: `nn.RMSNorm(eps=None)` uses float32's machine epsilon (1.19e-7) where
burn's RmsNorm uses 1e-5, and PyTorch's InstanceNorm has no weight or bias unless `affine=True`
where burn's has them by default. And
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
let conv = Conv2dConfig::new([3, 16], [3, 3]).init(&device); // PyTorch: nn.Conv2d(3, 16, 3, padding=1)
let rms = RmsNormConfig::new(512).init(&device); // PyTorch: nn.RMSNorm(512)
let norm = InstanceNormConfig::new(64).init(&device); // PyTorch: nn.InstanceNorm2d(64)
let act = PReluConfig::new().init(&device); // PyTorch: nn.PReLU(64)
```

## Use instead
```rust
let bn = BatchNormConfig::new(64).with_epsilon(1e-5).with_momentum(0.1).init(&device);
let ln = LayerNormConfig::new(512).with_epsilon(1e-5).init(&device);
let h = gelu(self.fc1.forward(x)); // burn::tensor::activation::gelu: the exact erf form
let lstm = LstmConfig::new(32, 64, true).with_batch_first(false).init(&device);
let conv = Conv2dConfig::new([3, 16], [3, 3])
    .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
    .init(&device);
let rms = RmsNormConfig::new(512).with_epsilon(1.1920929e-7).init(&device);
let norm = InstanceNormConfig::new(64).with_affine(false).init(&device);
let act = PReluConfig::new().with_num_parameters(64).init(&device);
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.forensics import evidence_of
from burnside.compare.layers.conv import parse_setting
from burnside.compare.layers.pool import parse as parse_pool
from burnside.compare.layers.settings import OWN_RULE
from burnside.compare.layers.norms import F32_EPS, INSTANCENORM, RMSNORM
from burnside.diagnose.diagnosis import Diagnosis
from burnside.rule import Severity

ID = "D011"
NAME = "layer-configured-differently"
TITLE = "layer configured differently"
SEVERITY = Severity.ERROR
PRECEDENCE = 110  # a layer's settings, measured where the forward differs (D010)
CATALOGUE = "layer"  # its fix gains burn's known differences of the diverging layer's class

_FORMS = {"erf": "the exact erf form", "tanh": "the tanh approximation", "silu": "SiLU, x sigmoid(x)",
          "relu": "ReLU", "quick": "the quick GELU x sigmoid(1.702 x) (CLIP's)", "sigmoid": "a sigmoid",
          "tanh-function": "tanh", "mish": "Mish, x tanh(softplus(x))",
          "identity": "no activation (the input as it is)",
          "seq-first": "reads [seq, batch, features] (time on the first axis)",
          "batch-first": "reads [batch, seq, features] (time on the second axis)"}
#: GELU's two forms: another activation is said as not one of them where the other side computes one.
_GELU_FORMS = ("erf", "tanh")
#: burn's call for each activation form (`norms.FORMS`).
_BURN_ACTIVATION = {
    "erf": "`burn::tensor::activation::gelu` (or `burn::nn::Gelu::new()`)",
    "tanh": "`burn::tensor::activation::gelu_approximate` (or `burn::nn::Gelu::new_approximate()`)",
    "quick": "`x.clone() * burn::tensor::activation::sigmoid(x.mul_scalar(1.702))` (burn has no quick GELU)",
    "silu": "`burn::tensor::activation::silu` (or `burn::nn::SiLU::new()`)",
    "relu": "`burn::tensor::activation::relu` (or `burn::nn::Relu::new()`)",
    "sigmoid": "`burn::tensor::activation::sigmoid`", "tanh-function": "`burn::tensor::activation::tanh`",
    "mish": "`burn::tensor::activation::mish`",
}


def _form(form: str, other: str) -> str:
    """An activation's form as a person reads it, beside the other side's ``other``: `the exact erf form of GELU`
    where the other computes no GELU, `SiLU, x sigmoid(x), not a GELU` where it does."""
    text = _FORMS[form]
    if form in _GELU_FORMS and other not in _GELU_FORMS:
        return f"{text} of GELU"
    if form not in _GELU_FORMS and other in _GELU_FORMS:
        return f"{text}, not nn.GELU" if form == "quick" else f"{text}, not a GELU"
    return text


def _literal(value: float) -> str:
    """A measured setting as a short literal: 9.9899e-06 -> `1e-5`, 0.0999999 -> `0.1`;
    float32's machine epsilon (`nn.RMSNorm(eps=None)`'s) in full, `1.1920929e-7`."""
    if abs(value - F32_EPS) < 1e-3 * F32_EPS:
        return "1.1920929e-7"
    text = f"{value:.2g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def _fix(kind: str, setting: str, wanted: float | str, against: float | str = "") -> str:
    if setting in ("gelu", "activation"):
        return _activation_fix(kind, str(wanted), str(against))
    if setting == "layout":
        config = "LstmConfig/BiLstmConfig"
        if wanted == "seq-first":
            return (f"run the {kind} over the first axis, as side A: `{config}::new(..).with_batch_first(false)` "
                    "(PyTorch's nn.LSTM and nn.GRU default to batch_first=False, burn's Lstm and BiLstm to true); "
                    "burn's Gru and BiGru read [batch, seq, features] only: `.swap_dims(0, 1)` before and after them")
        return (f"run the {kind} over the second axis, as side A (PyTorch's batch_first=True): burn's Lstm, BiLstm, "
                "Gru and BiGru read [batch, seq, features] by default; drop `with_batch_first(false)` or the "
                "`swap_dims(0, 1)` around the layer")
    if setting == "groups":
        return f"build the GroupNorm with {wanted} groups, as side A: `GroupNormConfig::new({wanted}, channels)`"
    if setting == "affine":
        return _affine_fix(kind, str(wanted))
    if setting == "normalised_by":
        if wanted == "running statistics":
            return (f"normalise by the loaded running statistics, as side A's {kind}(track_running_stats=True) "
                    "does in eval mode: burn's InstanceNorm has none and always uses each sample's own; compute "
                    "`(x - running_mean) / (running_var + eps).sqrt() * weight + bias` in forward, the buffers and "
                    "parameters shaped [1, channels, 1, ..] (loaded from the checkpoint's `running_mean`/"
                    "`running_var`), in place of the layer at inference")
        return (f"normalise each sample by its own statistics, as side A's {kind} does: "
                "`InstanceNormConfig::new(channels)` (burn's InstanceNorm keeps no running statistics), not the "
                "running statistics")
    if setting == "slopes":
        if wanted == "one":
            return ("give the PReLU one shared slope, as side A's `nn.PReLU()` (num_parameters=1): "
                    "`PReluConfig::new()` (burn's default, num_parameters 1, alpha 0.25)")
        channels = str(wanted).split("(")[-1].rstrip(")")
        return (f"give the PReLU a slope per channel, as side A's `nn.PReLU({channels})`: "
                f"`PReluConfig::new().with_num_parameters({channels})`, its `alpha` loaded from PyTorch's `weight`")
    if setting == "slope":
        value = _literal(float(wanted))
        return (f"use side A's PReLU slope {value}: `PReluConfig::new().with_alpha({value})` and its `alpha` loaded "
                "from PyTorch's `weight` (burn's and PyTorch's initial slope are both 0.25; a `leaky_relu` is a fixed "
                "slope, not a PReLU)")
    value = _literal(float(wanted))
    if kind.startswith("BatchNorm") and setting == "momentum":
        return (f"build the {kind} with momentum {value}: `BatchNormConfig::new(channels).with_momentum({value})`; "
                "burn's momentum means what PyTorch's does, the weight of the batch statistic "
                "(running = (1 - momentum) * running + momentum * batch), while TensorFlow's and Keras' momentum "
                "(0.99) is the weight of the old running value: convert it as 1 - that")
    config = ("BatchNormConfig::new(channels)" if kind.startswith("BatchNorm") else
              "GroupNormConfig::new(groups, channels)" if kind == "GroupNorm" else
              "RmsNormConfig::new(d_model)" if kind.endswith(RMSNORM) else
              "InstanceNormConfig::new(channels)" if kind in INSTANCENORM else "LayerNormConfig::new(d_model)")
    note = ""
    if kind == RMSNORM and value == "1.1920929e-7":
        note = (" (PyTorch's `nn.RMSNorm(eps=None)` uses `torch.finfo(float32).eps`, 1.1920929e-7 in a float32 "
                "model; burn's RmsNorm defaults to 1e-5)")
    if kind == "LayerNorm":
        note += (f"; a LayerNorm that burn's transformer builds takes it from "
                 f"`TransformerEncoderConfig::new(..).with_layer_norm_eps({value})` (or the decoder's)")
    return f"build the {kind} with epsilon {value}, as side A: `{config}.with_epsilon({value})`{note}"


def _configured(comparison: Comparison, module: str, setting: str) -> float | None:
    """A's configured value of a measured setting, from the PyTorch trace's `module_settings`, if it holds one."""
    settings = (comparison.a.metadata.get("module_settings") or {}).get(module) or {}
    keys = {"epsilon": ("eps", "variance_epsilon"), "momentum": ("momentum",)}.get(setting, ())
    value = next((settings[k] for k in keys if isinstance(settings.get(k), (int, float))
                  and not isinstance(settings.get(k), bool)), None)
    return float(value) if value is not None else None


def _activation_fix(kind: str, wanted: str, theirs: str) -> str:
    """burn's call for side A's activation form ``wanted`` where B computes ``theirs``, with what A's class is."""
    from burnside.compare.layers.norms import ACTIVATIONS

    shown = _form(wanted, theirs)
    if wanted in _GELU_FORMS and not shown.endswith("of GELU"):
        shown += " of GELU"
    if wanted == "identity":
        return f"leave the activation out, as side A's {kind} computes its input as it is"
    call = _BURN_ACTIVATION[wanted]
    instead = f", not {_BURN_ACTIVATION[theirs].split(' (')[0]}" if theirs in _BURN_ACTIVATION else ""
    if theirs == "identity":
        instead = " (the port applies none: the activation is left out)"
    hidden_act = ACTIVATIONS.get(kind, ("", ""))[1]
    if hidden_act:
        note = (f"; side A's {kind} is Hugging Face's activation for `hidden_act: \"{hidden_act}\"` (config.json): "
                "\"gelu\" is the exact erf form, \"gelu_new\", \"gelu_pytorch_tanh\" and \"gelu_fast\" the tanh "
                "approximation, \"quick_gelu\" x sigmoid(1.702 x), \"silu\" and \"swish\" SiLU")
    elif kind == "GELU":
        note = "; PyTorch's `nn.GELU()` is the erf form, `nn.GELU(approximate='tanh')` the tanh one"
    else:
        note = ""
    return f"use {shown}, as side A's {kind} computes: {call}{instead}{note}"


def _affine_fix(kind: str, wanted: str) -> str:
    """burn's way to give a norm side A's weight and bias (or none)."""
    if kind in INSTANCENORM or kind == "GroupNorm":
        config = ("InstanceNormConfig::new(channels)" if kind in INSTANCENORM
                  else "GroupNormConfig::new(groups, channels)")
        if wanted == "none":
            default = (" (burn's InstanceNorm defaults to affine true, PyTorch's InstanceNorm to affine=False)"
                       if kind in INSTANCENORM else "")
            return f"build the {kind} without weight and bias, as side A: `{config}.with_affine(false)`{default}"
        return (f"build the {kind} with a weight and bias, as side A's affine=True: `{config}.with_affine(true)`, "
                "loaded from the checkpoint")
    if kind == "LayerNorm":
        if wanted == "none":
            return ("side A's LayerNorm has no weight or bias (`elementwise_affine=False`); burn's LayerNorm always "
                    "trains a gamma: normalise with `burn::tensor::module::layer_norm(x, Tensor::ones([d_model], "
                    "&device), None, 1e-5)` in forward in place of the layer")
        if wanted == "weight only":
            return ("build the LayerNorm without bias, as side A's `nn.LayerNorm(d, bias=False)`: "
                    "`LayerNormConfig::new(d_model).with_bias(false)`")
        return "build the LayerNorm with a bias, as side A: `LayerNormConfig::new(d_model)` (with_bias true)"
    if kind == RMSNORM and wanted == "none":
        return ("side A's RMSNorm has no weight (`elementwise_affine=False`); burn's RmsNorm always trains a gamma: "
                "normalise with `x.clone() / (x.square().mean_dim(D - 1) + eps).sqrt()` in forward in place of the "
                "layer")
    return f"give the {kind} side A's parameters ({wanted}), loaded from the checkpoint"


def _slopes(measured: float | str) -> str:
    """`one` -> `one shared slope`, `per channel (4)` -> `a slope per channel (4)`."""
    return "one shared slope" if measured == "one" else f"a slope {measured}"


_CONV = ("stride", "padding", "dilation")


def _conv_fix(kind: str, settings: dict[str, str]) -> str:
    """burn's config call with side A's convolution settings."""
    stride, padding, dilation = (parse_setting(settings[name]) for name in _CONV)
    if kind == "Conv1d":
        call = (f"Conv1dConfig::new(channels_in, channels_out, kernel_size).with_stride({stride[0]})"
                f".with_padding(PaddingConfig1d::Explicit({padding[0]}, {padding[0]})).with_dilation({dilation[0]})")
    else:
        call = (f"Conv2dConfig::new([channels_in, channels_out], kernel_size).with_stride({list(stride)})"
                f".with_padding(PaddingConfig2d::Explicit({padding[0]}, {padding[1]}, {padding[0]}, {padding[1]}))"
                f".with_dilation({list(dilation)})")
    return (f"build the {kind} with side A's stride {settings['stride']}, padding {settings['padding']} and dilation "
            f"{settings['dilation']}: `{call}` (burn's defaults are stride 1, no padding (`Valid`), dilation 1, as "
            "PyTorch's are)")


def _pool_fix(kind: str, setting: str) -> str:
    """burn's config call for side A's pooling."""
    op, window, stride, padding = parse_pool(setting)
    if kind.endswith("1d"):
        config = f"{'MaxPool1dConfig' if op == 'max' else 'AvgPool1dConfig'}::new({window}).with_stride({stride})" \
                 f".with_padding(PaddingConfig1d::Explicit({padding}, {padding}))"
    else:
        config = (f"{'MaxPool2dConfig' if op == 'max' else 'AvgPool2dConfig'}::new([{window}, {window}])"
                  f".with_strides([{stride}, {stride}])"
                  f".with_padding(PaddingConfig2d::Explicit({padding}, {padding}, {padding}, {padding}))")
    what = "max pooling" if op == "max" else "average pooling (zero padding counted, PyTorch's count_include_pad=True)"
    return f"use {what} over side A's window, stride and padding: `{config}.init()`"


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis per layer setting that the two sides' own tensors show to differ."""
    layer = evidence_of(comparison).layer
    if layer is None:
        return []
    found = []
    a, b = comparison.side_name("a"), comparison.side_name("b")
    forward = any(side.metadata.get("kind") == "forward" for side in (comparison.a, comparison.b))
    where = f"{layer.module} ({layer.kind}) at {'batch' if forward else 'step'} {layer.step}"
    output = f"step{layer.step}.activations.{layer.module}"
    if layer.input_from_a:
        own = (f"{layer.input} (the layer's input as A recorded it, which B's layer receives since everything "
               "before it agrees)")
    else:
        own = f"each side's own {layer.input} (the layer's input)"
    sources = {"momentum": f"from {own}, its batch mean, and each side's "
                           f"running_mean before and after step {layer.step}",
               "epsilon": f"from {own}, {output} and its weight and bias",
               "groups": f"from {own}, {output} and its weight and bias",
               "gelu": f"from {own} and {output}",
               "activation": f"from {own} and {output}",
               "layout": f"by re-running the layer both ways on {own} with its own weights at step {layer.step}, "
                         f"against {output}"}
    formulas = {"epsilon": "the layer's formula", "momentum": "the running-mean update"}
    targets = {"epsilon": "B's output", "momentum": "B's running mean"}
    differing = [d for d in layer.differing() if d[0] not in OWN_RULE]
    conv = [d for d in differing if d[0] in _CONV]
    if conv:
        ma, mb = layer.measured["a"], layer.measured["b"]
        ra, rb = layer.residuals["a"], layer.residuals["b"]
        shapes = ""
        rows = [r for r in comparison.structure if r.name == output and r.what == "shape"]
        if rows:
            shapes = f"; the output shapes differ ({rows[0].a} on A, {rows[0].b} on B), B's is what its settings give"
        at_a = rb.get("conv_at_a", float("inf"))
        missed = ("A's settings do not give B's output shape" if at_a == float("inf")
                  else f"B's output with A's settings misses by {at_a:.2g}, relative")
        found.append(Diagnosis(
            ID, TITLE,
            f"{where}: {a} computes it with " + ", ".join(f"{n} {ma[n]}" for n in _CONV) +
            f" (relative residual {ra['conv']:.2g}), {b} with " + ", ".join(f"{n} {mb[n]}" for n in _CONV) +
            f" (residual {rb['conv']:.2g}), measured by re-running the convolution on {own} with its own weight "
            f"and bias against {output}: the settings that give each side's output shape, confirmed by value"
            f"{shapes}; {missed}",
            _conv_fix(layer.kind, {n: str(ma[n]) for n in _CONV})))
    for setting, on_a, on_b in differing:
        if setting in _CONV:
            continue
        if setting == "groups":
            found.append(Diagnosis(
                ID, TITLE,
                f"{where}: {a} normalises over {on_a} groups of channels, {b} over {on_b} (the number of groups "
                f"whose formula reproduces each side's output, within {layer.residuals['a']['epsilon']:.2g} and "
                f"{layer.residuals['b']['epsilon']:.2g}, relative, measured {sources[setting]})",
                _fix(layer.kind, setting, on_a)))
            continue
        if setting == "epsilon" and {"groups", "normalised_by"} & {d[0] for d in differing}:
            continue  # an epsilon under other groups or statistics says nothing of A's
        if setting in ("affine", "normalised_by", "slopes"):
            what = {"affine": f"has {on_a} on {a} and {on_b} on {b} (the parameters each side's trace holds for "
                              f"it; the formula with them reproduces each side's output within "
                              f"{layer.residuals['a'].get('epsilon', 0.0):.2g} and "
                              f"{layer.residuals['b'].get('epsilon', 0.0):.2g}, relative)",
                    "normalised_by": f"is normalised by {on_a} on {a} and by {on_b} on {b} (the statistics whose "
                                     f"formula reproduces each side's output, measured {sources['epsilon']})",
                    "slopes": f"has {_slopes(on_a)} on {a} and {_slopes(on_b)} on {b} (the slope of each channel's "
                              f"negative part, measured {sources['gelu']}; within "
                              f"{layer.residuals['a'].get('slope', 0.0):.2g} and "
                              f"{layer.residuals['b'].get('slope', 0.0):.2g}, relative)"}[setting]
            found.append(Diagnosis(ID, TITLE, f"{where} {what}", _fix(layer.kind, setting, on_a)))
            continue
        if setting == "pool":
            res_a, res_b = layer.residuals["a"], layer.residuals["b"]
            found.append(Diagnosis(
                ID, TITLE,
                f"{where}: {a} pools with {on_a} (relative residual {res_a['pool']:.2g}), {b} with {on_b} (residual "
                f"{res_b['pool']:.2g}; A's pooling misses B's output by {res_b.get(str(on_a), float('inf')):.2g}), "
                f"measured by re-running the pooling on {own} against {output}",
                _pool_fix(layer.kind, str(on_a))))
            continue
        if setting == "slope":
            res_b = layer.residuals["b"]
            found.append(Diagnosis(
                ID, TITLE,
                f"{where}: PReLU slope {_literal(float(on_a))} on {a}, {_literal(float(on_b))} on {b} (least-squares "
                f"{float(on_a):.6g} and {float(on_b):.6g} from the negative part of {own} against {output}; each "
                f"reproduces its side within {max(layer.residuals['a']['slope'], res_b['slope']):.2g}, relative; "
                f"B's output with A's slope misses by {res_b.get('slope_at_a', float('inf')):.2g})",
                _fix(layer.kind, setting, on_a)))
            continue
        if setting in ("gelu", "activation", "layout"):
            res_a, res_b = layer.residuals["a"], layer.residuals["b"]
            evidence = (f"{where}: {a} computes {_form(str(on_a), str(on_b))} (relative residual "
                        f"{res_a[str(on_a)]:.2g}; the other form {res_a[str(on_b)]:.2g}), {b} "
                        f"{_form(str(on_b), str(on_a))} (residual {res_b[str(on_b)]:.2g}; the other form "
                        f"{res_b[str(on_a)]:.2g}), measured {sources.get(setting, '')}")
            if setting == "layout":
                evidence = (f"{where}: {a} {_FORMS[str(on_a)]} (relative residual {res_a[str(on_a)]:.2g}; the other "
                            f"reading {res_a[str(on_b)]:.2g}), {b} {_FORMS[str(on_b)]} (residual "
                            f"{res_b[str(on_b)]:.2g}; the other reading {res_b[str(on_a)]:.2g}), measured "
                            f"{sources[setting]}")
        else:
            res_a, res_b = layer.residuals["a"][setting], layer.residuals["b"][setting]
            configured = _configured(comparison, layer.module, setting)
            if configured is not None and _literal(configured) != _literal(float(on_a)):
                # the module's own setting where A's trace holds it and the measure did not resolve it: an epsilon
                # far below what float32 rounds its output to
                evidence = (f"{where}: {setting} {_literal(configured)} on {a} (its module's configured value; "
                            f"measured {_literal(float(on_a))}), {_literal(float(on_b))} on {b} (least-squares "
                            f"{float(on_b):.6g} {sources[setting]}; with them {formulas[setting]} reproduces each "
                            f"side within {max(res_a, res_b):.2g}, relative; {targets[setting]} with A's {setting} "
                            f"misses by {layer.residuals['b'][setting + '_at_a']:.2g})")
                found.append(Diagnosis(ID, TITLE, evidence, _fix(layer.kind, setting, configured)))
                continue
            evidence = (f"{where}: {setting} measured {_literal(float(on_a))} on {a}, {_literal(float(on_b))} on "
                        f"{b} (least-squares {float(on_a):.6g} and {float(on_b):.6g} {sources[setting]}; with them "
                        f"{formulas[setting]} reproduces each side within {max(res_a, res_b):.2g}, relative; "
                        f"{targets[setting]} with A's {setting} misses by "
                        f"{layer.residuals['b'][setting + '_at_a']:.2g})")
        found.append(Diagnosis(ID, TITLE, evidence, _fix(layer.kind, setting, on_a, on_b)))
    return found

"""D015 BatchNorm normalises with other statistics.

## What it does
When the first divergence is a BatchNorm1d/2d/3d's output (or running statistics), fits the
layer's formula on each side from its input (what the PyTorch side recorded feeding it, its
`layer_inputs`, or the activation recorded before it), its weight and bias and its running
statistics: with the batch statistics (per channel, the mean and biased variance over the batch
and spatial axes: training mode) and with the running statistics (eval mode). It names the side
whose output fits the other statistics than side A's, with both residuals. The burn trace's
`mode` (`autodiff`, `inference`) is quoted as support; the verdict is the measurement. An inference
port on an autodiff device whose layers are not recorded (graph capture records no autodiff
forward) is measured otherwise: burnside-trace captures its forward pass without autodiff beside
the port's own, and when that gives A's output where the port's does not, and A's model has a
BatchNorm or Dropout, the device's training mode is named.

## Why is this bad?
burn's `BatchNorm` uses the batch statistics when its input is on an autodiff device and the
module is in training mode, the running statistics otherwise; PyTorch's by the module's
`training` flag (`model.eval()`). An inference port run on an autodiff device (`.autodiff()`, or a
model never put through `.valid()`) normalises each batch by itself: every output then depends on
the rest of the batch, and differs from PyTorch's eval-mode output from the first BatchNorm on. A
training step with one side in eval mode differs the other way.

## Example
```rust
let device = Device::default().autodiff(); // inference on an autodiff device
let model = load_model(&device);
let y = model.forward(x); // BatchNorm normalises with the batch statistics
```

## Use instead
```rust
let device = Device::default(); // no autodiff: inference
let model = load_model(&device);
let y = model.forward(x); // BatchNorm normalises with the running statistics, as PyTorch's eval()
// or, with a model on an autodiff device: model.valid().forward(x)
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.forensics import evidence_of
from burnside.rule import Severity

ID = "D015"
NAME = "batchnorm-mode"
TITLE = "BatchNorm normalises with other statistics"
SEVERITY = Severity.ERROR
PRECEDENCE = 70  # BatchNorm's statistics: before the forward's generic difference (D010)
#: The measured statistics (or the autodiff device's measure) name the divergence D010 calls generic.
SUPERSEDES = ("D010",)

_STATISTICS = {"batch": "the batch statistics (per channel, the mean and biased variance over the batch and spatial "
                        "axes: training mode)",
               "running": "the running statistics (eval mode)"}


def _mode(comparison: Comparison, side: str) -> str:
    """What the side's trace says of its mode, as support: `; its trace says mode autodiff`."""
    mode = (comparison.a if side == "a" else comparison.b).metadata.get("mode")
    return f"; its trace says mode {mode}" if isinstance(mode, str) else ""


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis when a BatchNorm's output fits the batch statistics on one side and the running ones on the other."""
    layer = evidence_of(comparison).layer
    if (layer is None or not layer.kind.startswith("BatchNorm")) and comparison.autodiff_differs:
        return _from_the_autodiff_device(comparison)
    if layer is None or not layer.kind.startswith("BatchNorm"):
        return []
    found = [d for d in layer.differing() if d[0] == "statistics"]
    if not found:
        return []
    _, on_a, on_b = found[0]
    forward = comparison.a.metadata.get("kind") == "forward" or comparison.b.metadata.get("kind") == "forward"
    # inference normalises with the running statistics, a training step with the batch's
    wrong = ("a" if on_a == "batch" else "b") if forward else ("a" if on_a == "running" else "b")
    res_a, res_b = layer.residuals["a"], layer.residuals["b"]
    where = f"{layer.module} ({layer.kind}) at {'batch' if forward else 'step'} {layer.step}"
    source = (f"{layer.input} (the layer's input as A recorded it)" if layer.input_from_a
              else f"each side's own {layer.input} (the layer's input)")
    name = comparison.side_name(wrong)
    framework = (comparison.a if wrong == "a" else comparison.b).framework
    evidence = (f"{where}: {comparison.side_name('a')}'s output is its input normalised with {_STATISTICS[on_a]} "
                f"(relative residual {res_a[on_a]:.2g}; with the {on_b} statistics {res_a[on_b]:.2g}), "
                f"{comparison.side_name('b')}'s with {_STATISTICS[on_b]} (residual {res_b[on_b]:.2g}; with the "
                f"{on_a} statistics {res_b[on_a]:.2g}), measured from {source}, its weight and bias and its running "
                f"mean and variance{_mode(comparison, wrong)}: {name}'s BatchNorm runs in "
                f"{'training' if (on_a if wrong == 'a' else on_b) == 'batch' else 'eval'} mode")
    burn = framework != "pytorch"
    if forward and burn:
        fix = ("on an autodiff device burn's BatchNorm uses the batch statistics: run inference on "
               "`Device::default()` (not `.autodiff()`), or call `model.valid()` before the forward")
    elif forward:
        fix = ("put the PyTorch model in eval mode for inference, `model.eval()` (`burnside.torch.record_forward`'s "
               "default, eval=True)")
    elif burn:
        fix = ("run the training step on an autodiff device (`Device::default().autodiff()`) with the model in "
               "training mode (not after `.valid()`): burn's BatchNorm uses the batch statistics only there")
    else:
        fix = "keep the PyTorch model in training mode for the step (`model.train()`), as the other side is"
    return [Diagnosis(ID, TITLE, evidence, fix)]


def _from_the_autodiff_device(comparison: Comparison) -> list[Diagnosis]:
    """An inference port on an autodiff device whose layers are not recorded: its forward pass captured without
    autodiff (burnside-trace records it beside the port's own) gives A's output, the port's does not. Named when
    A's model has a BatchNorm (or Dropout) for the device to switch into training mode."""
    modules = comparison.a.metadata.get("modules") or {}
    switched = [m for m, kind in modules.items() if str(kind).startswith(("BatchNorm", "Dropout"))]
    if not switched:
        return []
    listed = ", ".join(f"{m} ({modules[m]})" for m in switched[:4]) + (
        f" and {len(switched) - 4} more" if len(switched) > 4 else "")
    evidence = (f"{comparison.autodiff_differs}{_mode(comparison, 'b')}: on an autodiff device burn's BatchNorm "
                f"normalises with the batch statistics (and Dropout drops), as PyTorch's training mode does; A's "
                f"model has {listed} and ran in eval mode")
    fix = ("on an autodiff device burn's BatchNorm uses the batch statistics: run inference on `Device::default()` "
           "(not `.autodiff()`), or call `model.valid()` before the forward")
    return [Diagnosis(ID, TITLE, evidence, fix)]

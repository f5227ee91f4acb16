"""D013 dropout mask.

## What it does
When the first divergence is the output of a dropout layer (the PyTorch module's class is
`Dropout`, `Dropout1d/2d/3d`, `AlphaDropout` or `FeatureAlphaDropout`) in a training trace
and its input agrees (what A recorded feeding it, `layer_inputs`, when that is not the layer
recorded before it: a functional ReLU between them), or a forward row of a comparison where a
trace says it was recorded with dropout on (`record(..., dropout=True)`: metadata `dropout:
on: ...`), says that the difference is the dropout's random mask, and how to compare with
dropout off. In a forward trace the side recorded for inference has its dropouts off: a
dropout's output that differs is named only when measured as below; otherwise D010 names
the code before it.

When one side's values there are the other's, elementwise, either zeroed or scaled by one
common factor 1/(1 - p) (at a dropout's output, a module holding one, or the layer after one),
in a model that has a dropout, it measures p and names the side whose dropout is on: in a
forward trace, a dropout active at inference (burn's `Dropout` is on whenever its input is on
an autodiff device and the module is in training mode; PyTorch's until `model.eval()`).
A layer holding a dropout that no tap shows (burn's MultiHeadAttention, 0.1 by default) that
parts first on a side whose trace says mode autodiff is named when a tapped dropout's output,
on that side's own tensors, is the activation before it zeroed and scaled: that side's
dropouts are on, and the layer's own is the likely cause (not measured inside the layer).

## Why is this bad?
In training mode a dropout layer zeroes a random subset of its input, drawn from the
framework's own random number generator. PyTorch's and burn's generators, seeds and
draw orders differ, so the two masks never match: the outputs differ from the first
forward pass, whether or not the port is right, and a layer-by-layer comparison stops at
the first dropout. The same happens when only one side has dropout on (burn's
`MultiHeadAttentionConfig` defaults to a dropout of 0.1 where `nn.MultiheadAttention`'s is 0).

## Example
```rust
let drop = DropoutConfig::new(0.1).init(); // PyTorch: nn.Dropout(0.1), recorded in training mode
```

## Use instead
```rust
let drop = DropoutConfig::new(0.0).init(); // for the parity check: dropout off on both sides,
// and the PyTorch side recorded with burnside.torch.record's default: dropout off
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.diagnose.dropout import is_dropout_divergence, is_forward, recorded_with_dropout
from burnside.forensics import evidence_of
from burnside.rule import Severity
from burnside.trace import parse_name

ID = "D013"
NAME = "dropout-mask"
TITLE = "dropout masks differ"
SEVERITY = Severity.ERROR
PRECEDENCE = 50  # dropout's masks: before the forward they change
CATALOGUE = "layer"  # its fix gains burn's known differences of the diverging layer's class


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis when the first divergence is a dropout layer's output, or a side ran with dropout on."""
    if not is_dropout_divergence(comparison):
        return []
    first = comparison.first_divergence
    measured = evidence_of(comparison).dropout
    if measured is not None and is_forward(comparison):
        return [_measured(comparison, measured)]
    shown = f"; measured: {_shown(comparison, measured)}" if measured is not None else ""
    on = recorded_with_dropout(comparison)
    if on:
        side, dropouts = on[0]
        return [Diagnosis(
            ID, TITLE,
            f"{comparison.side_name(side)} was recorded with its dropout on ({dropouts}), and the forward parts at "
            f"{first.name}: a dropout in training mode zeroes a random subset drawn from each framework's own random "
            f"numbers, which never match{shown}",
            "record with dropout off, `burnside.torch.record(...)` and `record_reference(...)`'s default (drop "
            "`dropout=True`), and build the burn model's dropouts with probability 0 (`DropoutConfig::new(0.0)`, "
            "`MultiHeadAttentionConfig::with_dropout(0.0)`)")]
    kind, before = comparison.layer_of(first)
    fed = evidence_of(comparison).dropout_input
    module = parse_name(first.name).rest
    # a side recorded with dropout off: the other side's is on
    torch_off = any(side.metadata.get("dropout") == "off" for side in (comparison.a, comparison.b))
    evidence = (f"{first.name} ({kind}) differs (max|diff|={first.stats.max_abs:.3g}, {first.stats.differing} of "
                f"{first.stats.n} elements) while "
                + (f"its input, {fed.input}, agrees" if fed is not None and fed.input_is_before is not True
                   else f"its input, {before.name}, agrees" if before is not None else "the step's inputs agree")
                + ": a dropout in training mode zeroes a random subset drawn from each framework's own random "
                  "numbers, which never match"
                + ("; the PyTorch side was recorded with dropout off, so the other side's dropout is on"
                   if torch_off else "") + shown)
    fix = (f"compare with dropout off on both sides: build the burn model's {module} with probability 0 "
           "(`DropoutConfig::new(0.0)`, and `MultiHeadAttentionConfig::with_dropout(0.0)`, whose default is 0.1) "
           "and record the PyTorch side with dropout off (`burnside.torch.record`'s and `record_reference`'s "
           "default)")
    return [Diagnosis(ID, TITLE, evidence, fix)]


def _shown(comparison: Comparison, found) -> str:
    """What the measurement shows: `B (burn)'s values are A (pytorch)'s with 267 of 949 elements zeroed ...`."""
    on, off = comparison.side_name(found.side), comparison.side_name("b" if found.side == "a" else "a")
    return (f"{on}'s values are {off}'s with {found.zeroed} of {found.n} elements zeroed "
            f"({found.zeroed / found.n:.1%}) and every other one multiplied by {found.scale:.6g} (within "
            f"{found.residual:.2g}, relative), 1/(1 - p) for p = {found.p:.3g}")


def _measured(comparison: Comparison, found) -> Diagnosis:
    """A forward trace where one side's values are the other's with a dropout applied: that side's dropout
    is active at inference, with p measured."""
    on = comparison.side_name(found.side)
    summary = comparison.a if found.side == "a" else comparison.b
    mode = summary.metadata.get("mode")
    where = f"at {found.tensor}" + (f" ({found.module})" if not found.tensor.endswith(f".{found.module}") else "")
    evidence = (f"{where}: {_shown(comparison, found)}: a dropout with probability {found.p:.2g} is active at "
                f"inference on {on}" + (f" (its trace says mode {mode})" if isinstance(mode, str) else ""))
    if found.at is not None:
        kind, _ = comparison.layer_of(comparison.first_divergence)
        held = "burn's MultiHeadAttention drops attention weights, 0.1 by default" if kind == "MultiheadAttention" \
            else "its dropout"
        evidence = (f"{comparison.first_divergence.name} ({kind}) differs first, and {on}'s trace says mode "
                    f"{mode}, where every burn dropout is on: on {on}'s own tensors, {found.at} is {found.source} "
                    f"with {found.zeroed} of {found.n} elements zeroed ({found.zeroed / found.n:.1%}) and every "
                    f"other one multiplied by {found.scale:.6g} (within {found.residual:.2g}, relative), 1/(1 - p) "
                    f"for p = {found.p:.3g}: a dropout is active at inference on {on}, and the one inside "
                    f"{found.module} ({held}), which no tap shows, is the likely cause of its difference (not "
                    "measured there)")
    if summary.framework != "pytorch":
        fix = ("on an autodiff device burn's Dropout is on: run inference on `Device::default()` (not `.autodiff()`), "
               "or call `model.valid()` before the forward, or build the dropouts with probability 0 "
               "(`DropoutConfig::new(0.0)`; `MultiHeadAttentionConfig::with_dropout(0.0)`, whose default is 0.1)")
    else:
        fix = ("put the PyTorch model in eval mode for inference, `model.eval()` (`burnside.torch.record_forward`'s "
               "default, eval=True)")
    return Diagnosis(ID, TITLE, evidence, fix)

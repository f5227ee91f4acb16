"""D017 loss computed differently.

## What it does
When a step's loss is the first tensor to differ and the step's logits agree, recomputes each side's loss at
every step from that side's own recorded logits and targets (`step{k}.logits`, `step{k}.inputs.{target}`) under
the losses a port may use: cross-entropy (mean; label smoothing, solved for, alone or with an ignored target -100
or 0 left out of the mean; a class weighting), MSE and L1 (mean, sum), SmoothL1 with its beta and Huber with its
delta (solved for), BCE-with-logits. It names the loss each side's numbers reproduce, and the burn code of the
PyTorch side's loss. A sum where the other side averages over the batch (a loss ratio equal to the batch size) is
D010's.

A loss of several terms (a `torch.nn.functional` loss plus a part written by hand, as a VAE's BCE plus KL) is
judged by its terms, which the PyTorch recorder measures (metadata `loss_terms`: each call's value and weight in
the loss, `burnside.forensics.loss_terms`): a term averaged where PyTorch sums it (or the reverse), the
hand-written rest of the loss with its sign flipped, a factor 0.5 left out or added, or off by another factor,
a term weighted otherwise.

## Why is this bad?
A loss of another form or setting gives other gradients from the first step: burn's `CrossEntropyLoss` without
`with_smoothing` where PyTorch smooths, `pad_tokens` not set where PyTorch ignores padding (burn then averages
over the pad rows too), a `HuberLoss` delta that is not PyTorch's SmoothL1 beta, `MseLoss` summed.

## Example
```rust
let loss = CrossEntropyLossConfig::new().init(&device).forward(logits, y); // PyTorch: label_smoothing=0.1
```

## Use instead
```rust
let loss = CrossEntropyLossConfig::new().with_smoothing(Some(0.1)).init(&device).forward(logits, y);
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.forensics import evidence_of
from burnside.forensics.loss_terms import measure_terms
from burnside.rule import Severity

ID = "D017"
NAME = "loss-differs"
TITLE = "loss computed differently"
SEVERITY = Severity.ERROR
PRECEDENCE = 90  # the loss: before the forward's generic difference (D010)
CATALOGUE = "loss"  # its fix gains burn's known differences of the loss function
#: D010 says only that the loss differs; this rule measures which loss each side computed.
SUPERSEDES = ("D010",)


def check(comparison: Comparison) -> list[Diagnosis]:
    """A diagnosis when each side's loss is reproduced by another loss, measured from its own outputs."""
    fit = evidence_of(comparison).loss
    if fit is None or not fit.named:
        terms = measure_terms(comparison)
        if terms is None:
            return []
        return [Diagnosis(ID, TITLE, f"step{terms.step}.loss differs while step {terms.step}'s outputs agree; "
                                     f"{terms.cause}", terms.fix)]
    a, b = comparison.side_name("a"), comparison.side_name("b")
    port, model = ("a", "b") if comparison.a.framework == "burn" and comparison.b.framework != "burn" else ("b", "a")
    def at(kind) -> str:
        return f"step {fit.step}" if kind.steps == 1 else f"steps {fit.step}-{fit.step + kind.steps - 1}"

    def said(side: str) -> str:
        kind = fit.a if side == "a" else fit.b
        name = a if side == "a" else b
        if kind is None:
            return f"{name}'s is no loss measured"
        other = b if side == "a" else a
        read = {"logits": "its own logits and targets", "loss_inputs": "what its loss function was given",
                "other": f"what {other}'s loss function was given (the same tensors: everything before the loss "
                         "agrees)"}[kind.read]
        return f"{name}'s is {kind.name} (recomputed from {read} at {at(kind)}, reproduced to {kind.residual:.1g})"

    evidence = f"step{fit.step}.loss differs while step {fit.step}'s logits agree; {said('a')}; {said('b')}"
    if fit.weighting is not None:
        # any loss between the per-class means is some weighting's: a hint, not a measure (logits paired with other
        # targets, a reshape in another order before the loss, lands there as often)
        evidence += (f"; {fit.weighting}: class weights, or logits paired with other targets than the other side's "
                     "(a reshape or transpose of the logits or targets before the loss)")
    wanted = fit.a if model == "a" else fit.b
    if wanted is not None:
        fix = (f"compute {comparison.side_name(port)}'s loss as {comparison.side_name(model)}'s ({wanted.name}): "
               f"{wanted.burn}")
    else:
        fix = (f"compute {comparison.side_name(port)}'s loss as {comparison.side_name(model)}'s: pair each row of "
               "logits with its own target (flatten logits [batch, seq, classes] and targets [batch, seq] in the same "
               "order, as PyTorch's `.view(-1, classes)` and `.view(-1)`); the class weights of "
               "nn.CrossEntropyLoss(weight=w) are CrossEntropyLossConfig::new().with_weights(Some(w)) in burn")
    if fit.weighting is not None and wanted is not None:
        fix += ("; and pair each row of logits with its own target (the same flatten order for logits and targets), "
                "or give the class weights as the other side's (CrossEntropyLossConfig::with_weights)")
    return [Diagnosis(ID, TITLE, evidence, fix)]

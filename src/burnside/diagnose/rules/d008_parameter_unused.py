"""D008 parameter unused by the forward.

## What it does
Finds steps where one side computed gradients for fewer parameters than the other while
its logits (or loss) of that step already differ: the parameters without a gradient never
took part in that side's forward.

## Why is this bad?
A forward that skips a layer's bias (`x.matmul(w)` instead of `linear.forward(x)`), a
branch or a whole submodule computes other logits, and the skipped parameters get no
gradient, so the optimizer never moves them. The missing gradients are a symptom: the
forward is what differs, from the first step. (When the logits agree and gradients are
still missing, the gradients were matched to another module: D002.)

## Example
```rust
fn forward(&self, x: Tensor<2>) -> Tensor<2> {
    relu(x.matmul(self.fc1.weight.val())).matmul(self.fc2.weight.val())
}
```

## Use instead
```rust
fn forward(&self, x: Tensor<2>) -> Tensor<2> {
    self.fc2.forward(relu(self.fc1.forward(x)))
}
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.forensics import evidence_of
from burnside.diagnose.diagnosis import Diagnosis, listed
from burnside.diagnose.gradients import forward_differs, missing_grads, short_steps
from burnside.rule import Severity
from burnside.trace import parse_name

ID = "D008"
NAME = "parameter-unused"
TITLE = "parameter unused by the forward"
SEVERITY = Severity.ERROR
PRECEDENCE = 60  # a parameter the forward leaves out: before the forward's generic difference (D010)
#: A layer the port's captured forward pass never runs names the divergence D010 calls generic.
SUPERSEDES = ("D010",)


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis per side whose forward differs where its gradients are missing; for a port recorded by graph
    capture, one when its forward pass never reads parameters it loaded."""
    found = _unread(comparison)
    for side in ("a", "b"):
        steps = [(k, n, other) for s, k, n, other in short_steps(comparison) if s == side]
        if not steps:
            continue
        k, n, other = steps[0]
        differs = forward_differs(comparison, k)
        if differs is None:
            continue
        missing = missing_grads(comparison, side, k)
        summary = comparison.a if side == "a" else comparison.b
        masks = evidence_of(comparison).masks if side == "b" else None
        if masks is not None and masks.b is not None and masks.b.memory != masks.own[masks.changed].memory:
            # the parameters are unused because a cross-attention reads another tensor than what they compute
            from burnside.diagnose.forward_causes.masks import masked_otherwise

            first = comparison.first_divergence
            kind, before = comparison.layer_of(first)
            after = (f"the layer before it, {parse_name(before.name).rest}, agrees" if before is not None
                     else "the step's inputs and parameters agree")
            told, fix = masked_otherwise(comparison, first, masks, after, kind)
            found.append(Diagnosis(
                ID, TITLE,
                f"{summary.name}: only {n} of {other} parameters got a gradient in step {k}"
                + (f" (none for {listed(missing, 4)})" if missing else "") + f"; {told}",
                fix))
            continue
        found.append(Diagnosis(
            ID, TITLE,
            f"{summary.name}: {differs} already differs, and only {n} of {other} parameters got a gradient in "
            f"step {k}" + (f" (none for {', '.join(missing)})" if missing else "")
            + ": those parameters are not used by its forward",
            "use every parameter in the forward as the PyTorch model does (e.g. `linear.forward(x)`, not "
            "`x.matmul(linear.weight.val())`)",
        ))
    return found


def _unread(comparison: Comparison) -> list[Diagnosis]:
    """A port recorded by graph capture whose forward pass never reads some parameters it holds, where the forward
    differs: the layers they belong to are left out of the port's forward, or, for a parameter a module holds itself
    beside its layers (torchvision's `encoder.pos_embedding`, a class token), the use the module's own forward makes
    of it."""
    if not comparison.unread or comparison.first_divergence is None:
        return []
    kinds = comparison.a.metadata.get("modules") or {}
    # a parameter of a module that has layers of its own is used by that module's own forward (added, prepended,
    # scaled by), not a layer to apply
    bare = [p for p in comparison.unread if "." in p and any(m.startswith(p.rsplit(".", 1)[0] + ".") for m in kinds)]
    if bare and len(bare) == len(comparison.unread):
        shown = ", ".join(f"{p} (held by {p.rsplit('.', 1)[0]} ({kinds.get(p.rsplit('.', 1)[0], 'a module')}) "
                          "itself, beside its layers)" for p in bare[:4])
        more = f" and {len(bare) - 4} more" if len(bare) > 4 else ""
        return [Diagnosis(
            ID, TITLE,
            f"{comparison.side_name('b')}'s forward pass, as its captured graph records it, never reads {shown}{more}, "
            f"which it holds as loaded; {comparison.first_divergence.name} differs: the port leaves out what the "
            "module's own forward does with it",
            "use " + " and ".join(_bare_use(p) for p in bare[:4]) + " in the port's forward where the PyTorch module's "
            "own forward does")]
    modules = list(dict.fromkeys(p.rsplit(".", 1)[0] for p in comparison.unread))
    named = ", ".join(f"{m} ({kinds[m]})" if m in kinds else m for m in modules[:4])
    more = f" and {len(modules) - 4} more" if len(modules) > 4 else ""
    params = ", ".join(comparison.unread[:4]) + (f" and {len(comparison.unread) - 4} more"
                                                 if len(comparison.unread) > 4 else "")
    return [Diagnosis(
        ID, TITLE,
        f"{comparison.side_name('b')}'s forward pass, as its captured graph records it, never reads {params}, which "
        f"it holds as loaded; {comparison.first_divergence.name} differs: the port leaves {named}{more} out of its "
        "forward",
        f"apply {named}{more} in the port's forward where the PyTorch model does (its module's `forward` on the "
        "input PyTorch gives it, added or chained as in the PyTorch forward)")]


def _bare_use(param: str) -> str:
    """How a module's own forward most often uses a parameter it holds itself, by its name."""
    leaf = param.rsplit(".", 1)[-1].lower()
    if "pos" in leaf:
        return f"{param} (a position embedding: added to the tokens, `x + {leaf}.val()`)"
    if "token" in leaf or "cls" in leaf:
        return (f"{param} (a class token: expanded over the batch and put before the tokens, "
                f"`Tensor::cat(vec![{leaf}.val().expand([batch, 1, d]), x], 1)`)")
    return f"{param}"

"""D012 port trains parameters the PyTorch side keeps frozen.

## What it does
Finds steps where the port's optimizer received gradients for parameters the PyTorch side
has none for, while that step's logits and loss agree, and lists them (with whether the
PyTorch side left them unchanged).

## Why is this bad?
PyTorch freezes a parameter by `requires_grad_(False)`, by computing its module's output
under `torch.no_grad()`, or by `.detach()`ing it: no gradient, no update. A DQN's target
network, a frozen encoder or embedding, a teacher model are frozen this way. burn's
parameters require gradients by default and `GradientsParams::from_grads(.., &model)` keys
every one the loss reached, so a port that leaves out the freezing trains them: the
forward still agrees at the first step, and the frozen part moves from then on.

A parameter PyTorch ties to another (`lm_head.weight = wte.weight`, metadata `tied`) that the
port keeps as its own (a separate head Linear initialised from the embedding) also has no
gradient of its own on the PyTorch side: it is named as untied, with the tying in burn as the
fix, and never as one to freeze.

## Example
```rust
let next_q = model.target.forward(next_obs);            // PyTorch: with torch.no_grad()
let grads = GradientsParams::from_grads(loss.backward(), &model);
```

## Use instead
```rust
let next_q = model.target.forward(next_obs).detach();   // no gradient reaches the target
// or keep the target frozen for good: `let target = model.target.no_grad();`
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis, listed
from burnside.diagnose.gradients import forward_differs, missing_grads
from burnside.rule import Severity

ID = "D012"
NAME = "trains-frozen-parameters"
TITLE = "port trains parameters the PyTorch side keeps frozen"
SEVERITY = Severity.ERROR
PRECEDENCE = 130  # which parameters train: before the update


UNTIED_TITLE = "port keeps a parameter of its own where PyTorch ties it to another"


def untied(torch_side, port) -> dict[str, str]:
    """The port's parameters that the PyTorch side's `tied` maps to another (`lm_head.weight` -> `wte.weight`):
    the port holds the two as separate parameters where PyTorch has one under two names."""
    tied = torch_side.metadata.get("tied")
    if not isinstance(tied, dict):
        return {}
    params = set(port.params)
    return {name: first for name, first in tied.items() if name in params and isinstance(first, str)}


def _untied_diagnosis(torch_side, port, pairs: dict[str, str]) -> Diagnosis:
    shown = ", ".join(f"{name} as its own parameter where PyTorch ties it to {first}" for name, first in pairs.items())
    name, first = next(iter(pairs.items()))
    module, weight = first.rsplit(".", 1) if "." in first else ("", first)
    evidence = (f"{port.name} keeps {shown} (PyTorch's {name} is {first}, one tensor under two names, metadata "
                f"'tied'): the port's {name} gets only the head's gradient and {first} only the embedding's, where "
                f"PyTorch's one parameter gets their sum, so the two part from the first update on")
    fix = (f"tie it in the port as PyTorch does: drop the separate {name} and compute the head from "
           f"{first} itself, `x.matmul(self.{module}.{weight}.val().transpose().unsqueeze())` for x of shape "
           "[batch, seq, d_model] (burn's `Embedding` holds `weight: Param<Tensor<2>>` of shape [vocab, d_model]; "
           "without `.unsqueeze()` for a 2-D x); burn accumulates both uses' gradients into the one parameter and "
           f"the recorder records it once, under {first}; never freeze {name}")
    return Diagnosis(ID, UNTIED_TITLE, evidence, fix)


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis when the PyTorch side got fewer gradients than the port while the forward agrees; a port
    parameter PyTorch ties to another is named as untied instead, never as one to freeze."""
    found = []
    for side, torch_side, port in (("a", comparison.a, comparison.b), ("b", comparison.b, comparison.a)):
        if torch_side.framework != "pytorch" or port.framework == "pytorch":
            continue
        pairs = untied(torch_side, port)
        if pairs and comparison.kind != "forward":  # a forward pass has no gradient: the load check judges a copy
            found.append(_untied_diagnosis(torch_side, port, pairs))
        for k in sorted(torch_side.grads_len):
            mine, theirs = torch_side.grads_len[k], port.grads_len.get(k)
            if theirs is not None:
                theirs -= sum(1 for name in pairs if name in missing_grads(comparison, side, k))
            if theirs is None or mine >= theirs or forward_differs(comparison, k) is not None:
                continue
            frozen = [p for p in missing_grads(comparison, side, k) if p not in pairs]
            never = f": {torch_side.framework} has none for {listed(frozen, 6)}, so it never updates them"
            evidence = (f"{port.name}: gradients for {theirs} parameters at step {k}, {torch_side.framework} for "
                        f"{mine}" + (never if frozen else ""))
            found.append(Diagnosis(
                ID, TITLE, evidence,
                "freeze them in the port as the PyTorch model does: `.detach()` the frozen module's output (PyTorch's "
                "`torch.no_grad()` or `.detach()`), or `module.no_grad()` for parameters with "
                "`requires_grad_(False)`; then `GradientsParams::from_grads` has no gradient for them and the "
                "optimizer leaves them alone"))
            break
    return found

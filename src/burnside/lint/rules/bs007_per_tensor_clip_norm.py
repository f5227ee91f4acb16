"""## What it does

Flags `GradientClippingConfig::Norm(max_norm)` and `GradientClipping::Norm(max_norm)`
in a file that is evidently a port of PyTorch code: the file mentions
`clip_grad_norm` or `torch` / `PyTorch` as a word (in code, comments or
strings; `libtorch` does not count), or uses `burnside_trace`. Elsewhere burn's
clipping by norm is a choice of its own and is left alone.

Blind spots: the evidence is looked for in the file holding the clipping
config only, so a port whose PyTorch references sit in another file of the
crate is not reported; the rule does not check what the PyTorch side clips,
so a port of a loop that really clips each parameter on its own
(`for p in params: clip_grad_norm_([p], max_norm)`) is reported too.

## Why is this bad?

burn's optimizer applies `GradientClipping::Norm(max_norm)` to each parameter
tensor separately: a gradient whose own L2 norm exceeds `max_norm` is scaled
down to it, the others are left alone (burn-optim `clip_by_norm`, called once
per tensor). PyTorch's `torch.nn.utils.clip_grad_norm_(params, max_norm)`
computes one norm over all the gradients together and scales every gradient by
`max_norm / total_norm` when that total exceeds `max_norm`. The two agree only
while the norm over all gradients stays at or below `max_norm` (then neither
clips). Above it PyTorch shrinks every gradient by one factor, while burn
leaves each tensor under the limit unchanged and cuts each one above it to
exactly `max_norm`: the port's update has another size and direction than the
original's, and nothing reports it.

## Example

```rust
// torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
let optim = AdamConfig::new()
    .with_epsilon(1e-8)
    .with_grad_clipping(Some(GradientClippingConfig::Norm(10.0)))
    .init();
```

## Use instead

Leave burn's clipping off and scale the gradients by one global norm before
the step, as burnside-trace's `ClipGradNorm` does (PyTorch's `clip_grad_norm_`):

```rust
let optim = AdamConfig::new().with_epsilon(1e-8).init();
let clip = ClipGradNorm::new(10.0);
// per step, recording the trace: recorder.with_clip_grad_norm(clip) once, then
let grads = clip.apply(&model, grads);
model = optim.step(lr, model, grads);
```
"""

from __future__ import annotations

import re

from burnside.lint.finding import Hit, Severity
from burnside.lint.syntax import SourceUnit, arguments_of, compact

ID = "BS007"
NAME = "per-tensor-clip-norm"
SEVERITY = Severity.INFO
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (b"GradientClipping",)
TITLE = "gradient clipping by norm is per tensor in burn, over all gradients in PyTorch's clip_grad_norm_"

# What marks a file as a port of PyTorch code; `libtorch` (burn's tch backend) is not a word match.
_PORT_RE = re.compile(rb"\b(?:py)?torch\b|clip_grad_norm|burnside_trace", re.IGNORECASE)


def check(unit: SourceUnit):
    calls = unit.nodes("clip_norm")
    if not calls or _PORT_RE.search(unit.source) is None:
        return
    for call in calls:
        args = arguments_of(call)
        limit = compact(args[0]) if len(args) == 1 else "max_norm"
        yield Hit(
            node=call,
            message=(
                f"`{compact(call)}` clips each parameter's gradient by its own norm; PyTorch's "
                f"`clip_grad_norm_` scales all gradients by one norm taken over all of them"
            ),
            help=(
                f"to match `clip_grad_norm_(params, {limit})`, leave burn's clipping off and scale every "
                f"gradient by `min(1, {limit} / (total_norm + 1e-6))` before `optim.step`, `total_norm` being "
                f"the L2 norm over all gradients together: burnside-trace's "
                f"`ClipGradNorm::new({limit}).apply(&model, grads)`"
            ),
        )

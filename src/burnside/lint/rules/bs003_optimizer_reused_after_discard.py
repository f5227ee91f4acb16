"""## What it does

Flags an optimizer that is stepped again after one of its step results was
discarded (a BS001 site) in the same function, and a discarded step inside a
loop, which the loop repeats.

Steps are matched by their receiver's text (`optim`, `self.optim`) within one
`fn`. Two steps in different arms of one `match`, or in the `if` and `else`
branches of one `if`, can never run in the same call and are not paired.

Blind spots: an optimizer reached under two names (`let o = &mut self.optim`)
is two optimizers to this rule; steps in different functions (a helper called
twice) are not paired; a loop that is left on the first pass (`break`,
`return`) still counts as repeating.

## Why is this bad?

Each `step` advances the optimizer's state (Adam's moments and step count,
momentum buffers) for the parameters it was given. When the updated module was
thrown away, the next step applies that advanced state to the old parameters:
the optimizer and the model have drifted apart, so even after fixing the first
step, the training no longer matches PyTorch's.

## Example

```rust
for _ in 0..epochs {
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optim.step(1e-3, model.clone(), grads);
}
```

## Use instead

```rust
for _ in 0..epochs {
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    model = optim.step(1e-3, model, grads);
}
```
"""

from __future__ import annotations

from collections import defaultdict

from burnside.lint.finding import Hit, Severity
from burnside.lint.prefilter import method_call
from burnside.lint.step_sites import StepSite, step_sites
from burnside.lint.syntax import SourceUnit, parent_of

ID = "BS003"
NAME = "optimizer-reused-after-discarded-step"
SEVERITY = Severity.WARNING
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (method_call(b"step"),)
TITLE = "optimizer is stepped again after a discarded step"

# How many earlier discarded steps of the same optimizer a step is checked
# against; keeps a function with thousands of exclusive arms linear.
_MAX_PAIRS = 32


def _branch_path(node) -> dict[int, int]:
    """For each `match` / `if` above `node`: which arm or branch it sits in (by start byte)."""
    path: dict[int, int] = {}
    child, current = node, parent_of(node)
    while current is not None:
        if current.type == "match_block":
            path[current.start_byte] = child.start_byte
        elif current.type == "if_expression":
            alternative = current.child_by_field_name("alternative")
            in_else = alternative is not None and alternative.start_byte <= child.start_byte < alternative.end_byte
            path[current.start_byte] = 1 if in_else else 0
        elif current.type == "function_item":
            break
        child, current = current, parent_of(current)
    return path


def _exclusive(a: dict[int, int], b: dict[int, int]) -> bool:
    return any(key in b and b[key] != arm for key, arm in a.items())


def check(unit: SourceUnit):
    groups: dict[tuple[int, str], list[StepSite]] = defaultdict(list)
    for site in step_sites(unit):
        key = (site.function.start_byte if site.function is not None else -1, site.receiver)
        groups[key].append(site)
    hits = []
    for sites in groups.values():
        discarded: list[tuple[StepSite, dict[int, int]]] = []
        for site in sites:
            path = _branch_path(site.call)
            for earlier, earlier_path in reversed(discarded[-_MAX_PAIRS:]):
                if earlier.call.end_byte <= site.call.start_byte and not _exclusive(path, earlier_path):
                    line = earlier.call.start_point.row + 1
                    hits.append(Hit(
                        node=site.call,
                        message=f"{TITLE}: `{site.receiver}` advanced its state at line {line} without the module",
                        help=f"assign the result of the step at line {line}, "
                             "so optimizer state and module stay in step",
                    ))
                    break
            else:
                if site.discarded and site.in_loop:
                    hits.append(Hit(
                        node=site.call,
                        message=f"`{site.receiver}` is stepped again on every loop iteration "
                                "while its result is discarded",
                        help="the optimizer state advances each iteration but the module never changes; "
                             "assign the step result",
                    ))
            if site.discarded:
                discarded.append((site, path))
    hits.sort(key=lambda h: h.node.start_byte)
    yield from hits

"""## What it does

Flags a module-optimizer step, `optim.step(lr, module, grads)`, whose result
(the updated module) is dropped: used as an expression statement, bound to `_`
or to an underscore name (`let _ = ...`, `_ = ...`, `let _model = ...`), or
bound to a name that is never read afterwards.

A step returned from a closure counts as dropped when the result of the
combinator it is passed to is dropped (`let _ = Some(m).map(|m| optim.step(..))`);
a closure handed to any other function is left alone. Whether a binding is
read is decided by name resolution on the syntax tree (shadowing respected).

A step counts as a module step when it has three arguments and the third is
gradients (named `grads`/`*_grads`/`gradients`, bound from
`GradientsParams::from_grads`/`from_module`/`accumulator.grads()`, typed
`GradientsParams`, or a call taking such gradients, like `to_params(grads)`).
Scheduler `step()`, environment `step(action)` and four-argument tensor-level
`step` calls are not module steps; neither is L-BFGS `step(lr, module,
&mut closure)`.

Blind spots: gradients under a name and binding that say nothing about
gradients (`optim.step(lr, m, g)` with `g: G` a generic parameter) are not
recognised (`--rustc` adds rustc's type-aware `unused_results` for expression
statements); a result stored somewhere and never read again (pushed into a
`Vec` that is dropped) counts as used. In test code, a
discarded step followed by reading the optimizer's state (`to_record()`,
`into_bytes()`, `save(...)`) is treated as deliberate, and so is one that is
the last statement of a `#[test]` function (a "does not panic" test).

## Why is this bad?

burn's optimizers are functional: `step` takes the module by value and returns
the updated one, and it is not `#[must_use]`. When the result is dropped the
parameters never change, the loss never moves, and stateful optimizers (Adam)
advance their moment estimates anyway. rustc says nothing about
`let _model = optim.step(...)`, and its `.clone()` suggestions for E0382/E0507
lead straight to this bug.

## Example

```rust
let grads = GradientsParams::from_grads(loss.backward(), &model);
optim.step(0.1, model.clone(), grads);
```

## Use instead

```rust
let grads = GradientsParams::from_grads(loss.backward(), &model);
model = optim.step(0.1, model, grads);
```
"""

from __future__ import annotations

from burnside.lint.finding import Hit, Severity
from burnside.lint.prefilter import method_call
from burnside.lint.step_sites import StepSite, step_sites, strip_wrappers
from burnside.lint.syntax import (
    SourceUnit,
    arguments_of,
    enclosing_function,
    method_name,
    receiver_of,
    text,
)

ID = "BS001"
NAME = "step-result-discarded"
SEVERITY = Severity.ERROR
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (method_call(b"step"),)
TITLE = "result of optimizer step is discarded"


def suggested_fix(site: StepSite) -> str:
    """`model = optim.step(lr, model, grads);` built from the call's own arguments."""
    args = [text(a) for a in arguments_of(site.call)]
    module = site.module_arg
    target_node = strip_wrappers(module)
    if target_node.type == "call_expression" and method_name(target_node) == "clone":
        inner = receiver_of(target_node)
        if inner is not None:
            target_node = inner
    target = text(target_node)
    # Once the result is assigned back, the `.clone()` is no longer needed.
    module_text = target
    if (module.type == "unary_expression" and text(module).startswith("*")) or _mut_ref_param(site.call, target):
        # `optim.step(lr, *model, grads)` cannot move out of `&mut`, nor can a `&mut M` parameter be assigned
        # an `M`: write through it, from a clone.
        target = f"*{target}"
        module_text = f"{text(target_node)}.clone()"
    receiver = receiver_of(site.call)
    receiver_text = " ".join(text(receiver).split()) if receiver is not None else "optim"
    return f"{target} = {receiver_text}.step({args[0]}, {module_text}, {args[2]});"


def _mut_ref_param(node, name: str) -> bool:
    """Whether ``name`` is a `&mut` parameter of the function enclosing ``node`` (a `fn step(model: &mut M)`)."""
    function = enclosing_function(node)
    parameters = function.child_by_field_name("parameters") if function is not None else None
    for parameter in parameters.named_children if parameters is not None else []:
        pattern, kind = parameter.child_by_field_name("pattern"), parameter.child_by_field_name("type")
        if (pattern is not None and kind is not None and text(pattern) == name and kind.type == "reference_type"
                and any(child.type == "mutable_specifier" for child in kind.children)):
            return True
    return False


def check(unit: SourceUnit):
    for site in step_sites(unit):
        if not site.discarded:
            continue
        message = TITLE
        if site.discard != "expression statement":
            message = f"{TITLE} ({site.discard})"
        yield Hit(
            node=site.call,
            message=message,
            help=f"assign the updated module: `{suggested_fix(site)}`",
        )

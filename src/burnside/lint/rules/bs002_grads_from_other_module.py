"""## What it does

Flags `GradientsParams::from_grads(grads, &module)` in four cases:

1. `grads` comes from `loss.backward()` and the loss was built, within the
   same function, by an expression chain that never mentions `module`: not
   the module whose `forward` produced the loss, not a clone of it, not one
   of its fields (`&model.encoder`). A `.detach()` cuts the chain: what only
   reaches the loss through a detached tensor did not build it.
2. The gradients are then passed to `optim.step(lr, other, grads)` where
   `other` is a different module (not `module`, not a clone or alias of it,
   not a field of it or the module it is a field of), even when both appear
   in the loss. Both must be field paths or names bound by `let` or a `fn`
   parameter: a closure parameter (`Some(model).map(|m| ..)`) or a pattern
   binding could be either, so it is left alone.
3. `module` takes no gradients at all: it is frozen, and the file shows it
   (`let m = ...no_grad()` / `.set_require_grad(false)`; `model.target = ...`
   with one of those in the same function, or `self.target = ...` in any
   method; or `Agent { target: ...no_grad(), .. }` for a struct declared in
   the file with a non-tensor `target` field). When the gradients then step
   the module `module` is a field of (`from_grads(g, &model.target)`, then
   `optim.step(lr, model, grads)`), the finding says that step changes nothing.
   Without a step in sight it is not reported in test code, where a test may
   take a frozen module's gradients to show there are none.
4. `module` is a field of the stepped module whose name reads as a copy that
   is never trained by gradients (`target`, `target_net`, `critic_target`,
   `ema_*`, `teacher`, `frozen_*`, ...), and the loss chain never goes
   through it except by `.detach()`: the DQN target network keyed while the
   agent holding it is stepped. A field with any other name (`&model.head`
   with `model` stepped) is a deliberate way to train only that part, and is
   left alone.

A step is paired with its `from_grads` through the `let`s and expressions in
between (`let grads = if clip { clip_global(&model, grads, 10.0) } else
{ grads };`), when exactly one `from_grads` is found.

The rule follows `grads` back to `X.backward()`, `X` back to its `let`, and
every name in that expression back to its own `let` (a few levels deep). If
`module` (or what it was cloned from) appears anywhere in that chain, the call
is fine: that covers GAN-style code, where the generator's gradients flow
through the discriminator's `forward`. When the chain cannot be resolved (the
loss is a parameter, or comes from another function with no `forward` call in
sight, or only a loss function's `forward`, such as `mse.forward(output, y)`
with `output` a parameter), the rule says nothing.

Blind spots: names are compared as text after following `let` aliases and
`.clone()` in the same function, so two names for one module reached any
other way (a `&mut` re-borrow through a helper, a module moved into a struct
and read back) look like different modules only if they also fail every
alias check, and are then not reported; gradients built in one function and
stepped in another are not paired, nor are gradients that pass through a
`GradientsAccumulator`; loss chains deeper than six `let`s are cut off. A freeze is looked for in the same file
only; a field frozen in a
struct literal counts for every place ending in that field name, whatever
variable holds the struct; a file that also sets that field back with
`set_require_grad(true)` anywhere shows no freeze for it at all.

## Why is this bad?

`from_grads` looks gradients up by the `ParamId`s of the module it is given.
A different module instance (built separately, e.g. a second `init`) has other
`ParamId`s, so the result is empty (`len() == 0`), and `optim.step` then
silently changes nothing. A frozen module's parameters get no gradient from
`backward()` either, so keying to a frozen target network leaves the result
empty too; and gradients keyed to a part only ever update that part, so the
network the loss trains beside it never moves.

## Example

```rust
let model = config.init(&device);
let other = config.init(&device);
let loss = ce.forward(model.forward(x), y);
let grads = GradientsParams::from_grads(loss.backward(), &other);
```

A DQN agent holding its frozen target network:

```rust
model.target = model.target.set_require_grad(false);
let loss = td_loss(&model, &batch);
let grads = GradientsParams::from_grads(loss.backward(), &model.target);
model = optim.step(lr, model, grads);
```

## Use instead

```rust
let loss = ce.forward(model.forward(x), y);
let grads = GradientsParams::from_grads(loss.backward(), &model);
```

Key the gradients to the module that is stepped; its frozen part gets none
and stays as it is:

```rust
let grads = GradientsParams::from_grads(loss.backward(), &model);
model = optim.step(lr, model, grads);
```
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from burnside.lint.bindings import FunctionBindings, bindings_of
from burnside.lint.finding import Hit, Severity
from burnside.lint.prefilter import method_call
from burnside.lint.freezes import frozen_at
from burnside.lint.loss_chain import from_grads_sources, loss_chain, module_aliases, unclone
from burnside.lint.step_sites import StepSite, step_sites
from burnside.lint.suppression import in_test_code
from burnside.lint.syntax import SourceUnit, arguments_of, compact, enclosing_function, text

if TYPE_CHECKING:
    from tree_sitter import Node

ID = "BS002"
NAME = "grads-from-other-module"
SEVERITY = Severity.WARNING
#: a file holds one of these or this rule finds nothing in it (`burnside.lint.prefilter`)
TOKENS = (method_call(b"step"), b"from_grads")
TITLE = "gradients are taken against a module that did not build the loss"

# Loss functions also have a `forward`; they are poor suggestions for the module.
_LOSS_FN_RE = re.compile(r"loss|criterion|^ce$|mse|\(", re.IGNORECASE)


def _likely_module(receivers: list[str]) -> list[str]:
    ordered = list(dict.fromkeys(receivers))
    modules = [r for r in ordered if not _LOSS_FN_RE.search(r)]
    return modules or ordered


def _related(a: list[str], b: list[str]) -> bool:
    """Whether two alias lists can name the same module or one contains the other."""
    for x in a:
        for y in b:
            if x == y or x.startswith(y + ".") or y.startswith(x + "."):
                return True
    return False


def _part_of(keyed: list[str], stepped: list[str]) -> tuple[str, str] | None:
    """(keyed path, stepped path) when the keyed module is a field inside the stepped one."""
    for x in keyed:
        for y in stepped:
            if x.startswith(y + "."):
                return x, y
    return None


# A network that is by design never trained by gradients: a (DQN, DDPG, SAC, BYOL) target copy,
# an EMA or teacher copy, a frozen part.
_COPY_NAME_RE = re.compile(
    r"^(?:target(?:_(?:net|network|model|q|q_?net|critic\d*|actor|policy|value|encoder|module))?"
    r"|(?:critic\d*|actor|q|q_?net|policy|value|model|net|network)_target"
    r"|ema(?:_\w+)?|\w+_ema|teacher(?:_\w+)?|frozen(?:_\w+)?)$"
)


def _resolved(module: Node, bindings: FunctionBindings) -> bool:
    """A field path, or a name bound by `let` or a fn parameter (not a closure or pattern binding)."""
    if module.type in ("field_expression", "self"):
        return True
    return module.type == "identifier" and bindings.latest(text(module), module.start_byte) is not None


def _part_keyed(
    unit: SourceUnit,
    site: StepSite,
    call: Node,
    keyed: Node,
    keyed_aliases: list[str],
    part: tuple[str, str],
    bindings: FunctionBindings,
) -> Hit | None:
    """Gradients keyed to a field of the stepped module that the loss does not train."""
    args = arguments_of(call)
    keyed_text, whole = compact(keyed), compact(unclone(site.module_arg))
    line = unit.line(site.call)
    grads_text = " ".join(text(args[0]).split())
    fix = f"key the gradients to the stepped module: `GradientsParams::from_grads({grads_text}, &{whole})`"
    frozen = frozen_at(unit, keyed, keyed_aliases, bindings)
    if frozen is not None:
        freeze_line, how = frozen
        return Hit(
            node=args[1],
            message=(
                f"gradients are taken against `{keyed_text}`, which is frozen (`{how}` at line {freeze_line}): "
                f"there are none, so the step of `{whole}` at line {line} changes nothing"
            ),
            help=f"{fix}; its frozen part gets no gradients and stays as it is",
        )
    field = part[0].rsplit(".", 1)[1]
    if not _COPY_NAME_RE.match(field):
        return None
    chain = loss_chain(args[0], bindings)
    trained: list[str] = []
    if chain is not None:
        # The copy itself in the loss, undetached, does get gradients: what is trained is then unclear.
        if any(path == name or path.startswith(name + ".") for path in chain.paths for name in keyed_aliases):
            return None
        trained = [
            r for r in dict.fromkeys(chain.forward_receivers)
            if r.startswith(part[1] + ".") and r != part[0] and not r.startswith(part[0] + ".")
        ]
    what = f"`{trained[0]}`, which the loss trains," if trained else "the network the loss trains"
    return Hit(
        node=args[1],
        message=(
            f"gradients are taken against `{keyed_text}` only, a copy not meant to be trained, "
            f"while `{whole}` is stepped with them at line {line}: {what} gets no update"
        ),
        help=f"{fix}, and keep the copy out of training (`.no_grad()` on it, or `.detach()` on its output)",
    )


def _stepped_other_module(unit: SourceUnit):
    """`from_grads(g, &a)` whose result is passed to `optim.step(lr, b, ..)` with `b` not `a`."""
    for site in step_sites(unit):
        if site.function is None:
            continue
        bindings = bindings_of(site.function)
        sources = from_grads_sources(arguments_of(site.call)[2], bindings)
        if len(sources) != 1:
            continue
        call = sources[0]
        args = arguments_of(call)
        if len(args) != 2:
            continue
        keyed = unclone(args[1])
        stepped = unclone(site.module_arg)
        if not (_resolved(keyed, bindings) and _resolved(stepped, bindings)):
            continue
        keyed_aliases, stepped_aliases = module_aliases(keyed, bindings), module_aliases(stepped, bindings)
        if _related(keyed_aliases, stepped_aliases):
            part = _part_of(keyed_aliases, stepped_aliases)
            if part is not None:
                hit = _part_keyed(unit, site, call, keyed, keyed_aliases, part, bindings)
                if hit is not None:
                    yield hit
            continue
        line = unit.line(site.call)
        frozen = frozen_at(unit, keyed, keyed_aliases, bindings)
        why = f" (it is frozen, `{frozen[1]}` at line {frozen[0]}: there are none)" if frozen is not None else ""
        yield Hit(
            node=args[1],
            message=(
                f"gradients are taken against `{compact(keyed)}`{why}, but `{compact(stepped)}` is stepped "
                f"with them at line {line}"
            ),
            help="key the gradients to the module being stepped: "
                 f"`GradientsParams::from_grads(.., &{compact(stepped)})`",
        )


def check(unit: SourceUnit):
    reported: set[int] = set()
    for hit in _stepped_other_module(unit):
        reported.add(hit.node.start_byte)
        yield hit
    for call in unit.nodes("scoped_call"):
        function_node = call.child_by_field_name("function")
        name = function_node.child_by_field_name("name") if function_node is not None else None
        if name is None or text(name) != "from_grads":
            continue
        args = arguments_of(call)
        if len(args) != 2:
            continue
        function = enclosing_function(call)
        if function is None or args[1].start_byte in reported:
            continue
        bindings = bindings_of(function)
        keyed = unclone(args[1])
        # A test may take a frozen module's gradients on purpose, to show there are none.
        if _resolved(keyed, bindings) and not in_test_code(call):
            frozen = frozen_at(unit, keyed, module_aliases(keyed, bindings), bindings)
            if frozen is not None:
                freeze_line, how = frozen
                help = "take the gradients against the module the loss trains, not its frozen copy"
                chain = loss_chain(args[0], bindings)
                if chain is not None:
                    trained = [r for r in _likely_module(chain.forward_receivers)
                               if not _LOSS_FN_RE.search(r) and not _related([r], module_aliases(keyed, bindings))]
                    if trained:
                        grads_text = " ".join(text(args[0]).split())
                        help += f": `GradientsParams::from_grads({grads_text}, &{trained[0]})`"
                yield Hit(
                    node=args[1],
                    message=(
                        f"gradients are taken against `{compact(keyed)}`, which is frozen "
                        f"(`{how}` at line {freeze_line}): there are none, and a step with them changes nothing"
                    ),
                    help=help,
                )
                continue
        chain = loss_chain(args[0], bindings)
        if chain is None:
            continue
        # Only a loss function's forward in sight (`mse.forward(output, y)` with
        # `output` a parameter) means the module behind the loss is unknown.
        if not any(not _LOSS_FN_RE.search(r) for r in chain.forward_receivers):
            continue
        module = unclone(args[1])
        if module.type not in ("identifier", "field_expression", "self"):
            continue
        if any(chain.mentions(alias) for alias in module_aliases(module, bindings)):
            continue
        if args[1].start_byte in reported:
            continue
        modules = _likely_module(chain.forward_receivers)
        builders = ", ".join(f"`{r}`" for r in modules)
        grads_text = " ".join(text(args[0]).split())
        yield Hit(
            node=args[1],
            message=f"gradients are taken against `{compact(module)}`, but the loss was built by {builders}",
            help=(
                f"pass the module whose forward built the loss, e.g. "
                f"`GradientsParams::from_grads({grads_text}, &{modules[-1]})`"
            ),
        )

"""The float64 arbiter: the PyTorch side re-run in float64 from the same start and batches.

A float32 run of either framework differs from exact arithmetic by its rounding; the float64
run is close to exact arithmetic (2^-53 against 2^-24), so each side's distance to it measures
that side's own error. `burnside compare --reference` judges the two sides by those distances
(docs/compare.md). The float64 copy keeps the constants the float32 loop reads from its dtype
(`Float32Constants`: an RMSNorm's `eps=None`, `torch.finfo(x.dtype)` in the model's code), so it computes
the loop's own arithmetic in float64 and not another model's with a smaller epsilon.

burn's Adam and AdamW form their scalar constants in float32 (`1 - beta_2`, `1 - beta_2^t`)
where PyTorch uses double, and burn's BatchNorm updates `running_var` with the biased batch
variance where PyTorch uses the unbiased one. For such a loop a second float64 run with burn's
arithmetic is recorded next to the reference (a *variant*, named in the reference's metadata),
so the comparison can tell the framework's own arithmetic from a port's mistake.

A forward trace (`burnside.torch.record_forward`) has its reference too, `record_forward_reference`:
the same forward passes by a float64 copy of the model. It has no variant: with no optimizer step
and no running statistics carried into an output, burn's known arithmetic differences never meet it.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.errors import BurnsideError
from burnside.recording.float64 import F32_EPS, Float32Constants, _double_loss, _float64_loss_errors, _WithPins
from burnside.optimizers import OPTIMIZERS, by_torch_class
from burnside.optimizers.spec import BurnVariant
from burnside.recording.forward import (Forward, batch_list, check_forward_model, forward_statistics,
                                        record_forward_trace)
from burnside.recording.loop import LoopSettings, default_forward, loop_steps, record_trace
from burnside.recording.model import active_dropouts, check_model
from burnside.recording.optim_state import optimizer_kind, same_step
from burnside.recording.statistics import check_full_steps, layer_statistics_for

if TYPE_CHECKING:
    from burnside.progress import StepProgress

Batch = Mapping[str, torch.Tensor]

#: The variants with an optimizer's arithmetic in burn-optim 0.22.1 (`BurnVariant`, in the optimizer's module), by
#: the names the public `burnside.reference` gives them: Adam's and AdamW's float32 scalar constants (`burn-adam`),
#: RMSprop's `1 - alpha` and settings in float32 (`burn-rmsprop`), Muon's Newton-Schulz iteration in the parameters'
#: dtype with f32 settings (`burn-muon`).
BURN_ADAM, BURN_RMSPROP, BURN_MUON = (OPTIMIZERS[name].burn_variant.name  # type: ignore[union-attr]
                                      for name in ("adam", "rmsprop", "muon"))
#: The variant whose BatchNorm updates running_var with the biased batch variance, as burn-nn 0.22.1 does.
BURN_BATCHNORM = "burn-batchnorm"


class _BiasedRunningVar:
    """Hooks that make every training-mode BatchNorm of a module update `running_var` as burn does.

    PyTorch updates it with the unbiased batch variance (divided by n - 1), burn 0.22.1 with the
    biased one (divided by n), n the elements per channel; `running_mean` is the same in both.
    After each forward pass the update PyTorch made is replaced by burn's, from the same input.
    """

    def __init__(self, model: nn.Module) -> None:
        self.handles = []
        for module in model.modules():
            if (isinstance(module, nn.modules.batchnorm._BatchNorm) and module.track_running_stats
                    and module.momentum is not None):
                self.handles.append(module.register_forward_pre_hook(self._before))
                self.handles.append(module.register_forward_hook(self._after))
        self._previous: dict[int, torch.Tensor] = {}

    def _before(self, module: nn.Module, inputs: tuple) -> None:
        if module.training:
            self._previous[id(module)] = module.running_var.detach().clone()

    @torch.no_grad()
    def _after(self, module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        previous = self._previous.pop(id(module), None)
        if previous is None:
            return
        x = inputs[0]
        dims = [d for d in range(x.dim()) if d != 1]
        biased = x.var(dim=dims, unbiased=False)
        # a new tensor, not an in-place update: autograd saved the old one for the backward pass
        module.running_var = previous * (1 - module.momentum) + biased * module.momentum


def has_batchnorm(model: nn.Module) -> bool:
    """Whether ``model`` has a BatchNorm whose running variance burn would update otherwise."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats and m.momentum is not None
               for m in model.modules())


class _BurnArithmetic(torch.optim.Optimizer):
    """An optimizer on float64 tensors with burn-optim 0.22.1's arithmetic: each parameter's update is its
    optimizer's (`BurnVariant.update`, in the optimizer's module of `burnside.optimizers`). One subclass per variant
    (`variant_class`), named as the variant says (`_BurnAdam`, ...): the variant's trace records that class."""

    variant: BurnVariant

    def __init__(self, params, **settings) -> None:
        super().__init__(params, {**settings, **{k: v for k, v in self.variant.defaults.items() if k not in settings}})

    @torch.no_grad()
    def step(self, closure=None) -> None:
        """One update of every parameter with a gradient (``closure`` is not supported)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.variant.update(p, self.state[p], group)


_VARIANT_CLASSES: dict[str, type[_BurnArithmetic]] = {}


def variant_class(optimizer: str) -> type[_BurnArithmetic]:
    """The torch.optim class of the burn-arithmetic variant of ``optimizer`` (its name in a trace, `adam`), built with
    its settings as keywords (`_BurnAdam(params, lr=..., betas=..., eps=..., weight_decay=..., decoupled=...)`)."""
    variant = OPTIMIZERS[optimizer].burn_variant
    if variant is None:
        raise ValueError(f"burn computes {optimizer} as PyTorch does: it has no variant")
    return _variant_type(variant)


def _variant_type(variant: BurnVariant) -> type[_BurnArithmetic]:
    if variant.name not in _VARIANT_CLASSES:
        _VARIANT_CLASSES[variant.name] = type(variant.class_name, (_BurnArithmetic,),
                                              {"variant": variant, "__doc__": variant.update.__doc__})
    return _VARIANT_CLASSES[variant.name]


def _burn_variant(optimizer: torch.optim.Optimizer) -> BurnVariant | None:
    """The variant with burn's arithmetic of ``optimizer``'s kind, None where burn computes what PyTorch does."""
    known = by_torch_class(optimizer_kind(optimizer))
    return known.burn_variant if known is not None else None


def _record_variant(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Batch | Sequence[Batch],
                    variant: Path, name: str, settings: LoopSettings, progress: StepProgress | None) -> None:
    """The variant ``name`` of `record_reference`, recorded at ``variant`` from its own float64 copy, which is
    freed when this returns (the reference's copy is made after it: one copy alive at a time)."""
    double, opt = _double_copy(model, optimizer, burn_adam=_burn_variant(optimizer) is not None)
    hooks = _BiasedRunningVar(double) if has_batchnorm(model) else None

    def variant_progress(done: int, total: int, part: str | None = None) -> None:
        progress(done, total, f"{name} variant")

    try:
        double_loss = _double_loss(settings.loss_fn)
        with _float64_loss_errors(), Float32Constants(double, double_loss) as pins:
            metadata = _WithPins({**(settings.metadata or {}), "reference": "float64", "variant": name}, pins)
            record_trace(double, opt, _double_batches(batches), variant,
                         replace(settings, loss_fn=double_loss, metadata=metadata),
                         variant_progress if progress is not None else None)
    finally:
        for handle in hooks.handles if hooks else ():
            handle.remove()


def _double_batches(batches: Batch | Sequence[Batch]) -> Batch | list[Batch]:
    def double(batch: Batch) -> dict[str, torch.Tensor]:
        return {k: (v.double() if v.is_floating_point() else v) for k, v in batch.items()}

    return double(batches) if isinstance(batches, Mapping) else [double(b) for b in batches]


def _double_copy(model: nn.Module, optimizer: torch.optim.Optimizer, burn_adam: bool
                 ) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A float64 deep copy of ``model`` and a fresh optimizer of the same kind and settings on it; with
    ``burn_adam``, the optimizer with burn's arithmetic (`variant_class`: Adam's and AdamW's float32 constants,
    RMSprop's, Muon's iteration)."""
    if not _fresh(optimizer):
        raise BurnsideError("record the reference from a fresh optimizer (its state is not empty)")
    double = copy.deepcopy(model).double()
    by_id = {id(p): name for name, p in model.named_parameters()}
    params = dict(double.named_parameters())
    strangers = sum(id(p) not in by_id for group in optimizer.param_groups for p in group["params"])
    if strangers:
        raise BurnsideError(f"the optimizer holds {strangers} parameter(s) that are not the model's: build it on "
                            "model.parameters() of the model given to record_reference")
    groups = [{"params": [params[by_id[id(p)]] for p in group["params"]],
               **{k: v for k, v in group.items() if k != "params"}} for group in optimizer.param_groups]
    if not burn_adam:
        known = by_torch_class(optimizer_kind(optimizer))
        if known is not None and known.constructor_settings:
            # settings read from the constructor, not the groups (Adagrad's initial_accumulator_value)
            return double, type(optimizer)(groups, **{k: optimizer.defaults[k] for k in known.constructor_settings})
        try:
            return double, type(optimizer)(groups)
        except TypeError:
            pass  # a class of its own whose constructor needs its settings named: give it its defaults
        try:
            return double, type(optimizer)(groups, **optimizer.defaults)
        except (TypeError, ValueError) as exc:
            # a class of its own whose constructor takes other arguments than its groups and defaults
            raise BurnsideError(f"the float64 reference cannot rebuild the optimizer {type(optimizer).__name__} on the "
                                f"float64 copy ({type(optimizer).__name__}(param_groups) failed: {exc}); record "
                                "without reference= (the comparison then has no float64 referee), or give the "
                                "class a constructor that takes param groups as torch.optim's do") from None
    kind, variant = optimizer_kind(optimizer), _burn_variant(optimizer)
    if variant is None:
        raise BurnsideError(f"burn computes {kind} as PyTorch does: the reference records no variant of it")
    # each group with its own settings, as the float64 re-run of the same optimizer has them
    settings = [variant.settings(g, kind) for g in groups]
    return double, _variant_type(variant)([{"params": g["params"], **own}
                                           for g, own in zip(groups, settings, strict=True)], **settings[0])


def _fresh(optimizer: torch.optim.Optimizer) -> bool:
    """Whether no step has changed the optimizer's state: none at all, or only what its constructor makes
    (`Optimizer.fresh_state`: Adagrad's ``step`` 0 and ``sum`` at ``initial_accumulator_value``), which the float64
    copy makes anew."""
    known = by_torch_class(optimizer_kind(optimizer))
    fresh = known.fresh_state if known is not None else None
    return all(fresh is not None and fresh(state, optimizer.defaults) for state in optimizer.state.values())


def _check_rerunnable(optimizer: torch.optim.Optimizer) -> None:
    """Refuse an optimizer whose float64 re-run would silently differ from the recorded loop."""
    from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

    own = [getattr(optimizer, name, {}) for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")]
    hooks = sum(map(len, own)) + len(_global_optimizer_pre_hooks) + len(_global_optimizer_post_hooks)
    if hooks:
        raise BurnsideError(
            f"the optimizer has {hooks} step hook(s), which a float64 re-run cannot carry over (it builds a new "
            f"optimizer of the same class): pass what the hook does as an argument, e.g. clip_grad_norm=MAX to both "
            f"record(...) and record_reference(...) for torch.nn.utils.clip_grad_norm_")
    kind = type(optimizer)
    for base in (torch.optim.AdamW, torch.optim.Adam):
        if isinstance(optimizer, base) and not same_step(kind, base):
            raise BurnsideError(
                f"{kind.__name__} overrides {base.__name__}.step, which the float64 re-run with burn's arithmetic "
                f"cannot follow: record with torch.optim.{base.__name__} itself and pass gradient clipping as "
                f"clip_grad_norm=MAX to record(...) and record_reference(...)")


def _check_no_dropout(model: nn.Module) -> None:
    """Refuse a model whose dropout is on: the float64 re-run would draw other masks than the trace's run."""
    active = active_dropouts(model)
    if active:
        shown = ", ".join(active[:4]) + (f" and {len(active) - 4} more" if len(active) > 4 else "")
        raise BurnsideError(
            f"the model's dropout is on ({shown}): its masks are random numbers a float64 re-run draws anew, so no "
            "reference can judge it; record the trace and the reference with dropout off (the default), and build "
            "the burn model's dropout with probability 0 for the check")


def has_burn_adam_variant(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` is an Adam or AdamW burn would compute with other constants (any groups, each with its
    own settings, amsgrad's running maximum too)."""
    return _variant_name(optimizer) == BURN_ADAM


def has_burn_rmsprop_variant(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` is an RMSprop (burn forms its `1 - alpha` in f32; any groups)."""
    return _variant_name(optimizer) == BURN_RMSPROP


def has_burn_muon_variant(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` is a Muon (burn runs its Newton-Schulz iteration in the parameters' dtype; any groups)."""
    return _variant_name(optimizer) == BURN_MUON


def _variant_name(optimizer: torch.optim.Optimizer) -> str | None:
    variant = _burn_variant(optimizer)
    return variant.name if variant is not None else None


def variant_name(model: nn.Module, optimizer: torch.optim.Optimizer) -> str | None:
    """The variant a reference of this loop records next to it (`burn-adam` or `burn-rmsprop`, `burn-batchnorm`,
    or both joined by ``+``: one run with all of burn's known arithmetic the loop meets), None if burn computes it
    as PyTorch does."""
    used = (_variant_name(optimizer), BURN_BATCHNORM if has_batchnorm(model) else None)
    return "+".join(name for name in used if name) or None


def variant_path(path: str | Path, name: str) -> Path:
    """Where the reference at ``path`` keeps variant ``name``: ``{stem}.{name}.safetensors`` next to it."""
    path = Path(path)
    return path.with_name(f"{path.name.removesuffix('.safetensors')}.{name}.safetensors")


def reference_files(model: nn.Module, optimizer: torch.optim.Optimizer, path: str | Path, *,
                    variants: bool = True) -> list[Path]:
    """The files `record_reference` writes for this loop at ``path``, in the order it writes them: its variant's
    (with ``variants``, if the loop has one), then ``path``."""
    name = variant_name(model, optimizer) if variants else None
    return ([variant_path(path, name)] if name else []) + [Path(path)]


def record_reference(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Batch | Sequence[Batch],
    path: str | Path,
    *,
    steps: int | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | Callable[[torch.Tensor, Batch], torch.Tensor]
    = nn.functional.cross_entropy,
    forward: Callable | None = None,
    target: str | None = "y",
    metadata: Mapping[str, object] | None = None,
    variants: bool = True,
    clip_grad_norm: float | None = None,
    dropout: bool = False,
    lr_schedule: Callable[[torch.optim.Optimizer], object] | None = None,
    progress: StepProgress | None = None,
    layer_inputs: bool = False,
    accumulate: int = 1,
    full_steps: Sequence[int] | None = None,
    layer_statistics: bool | None = None,
) -> Path:
    """Record the float64 reference of a PyTorch loop at ``path``; call it before training ``model``
    (or pass ``reference=path`` to `burnside.torch.record`, which calls this first, with its arguments).

    ``model`` and ``optimizer`` are deep-copied to float64 (the originals are untouched), the
    batches' float tensors converted; the arguments mean what they mean for `burnside.torch.record`.
    The copy keeps the float32 loop's dtype-dependent constants (`Float32Constants`: an `nn.RMSNorm`'s
    ``eps=None``, `F.rms_norm(eps=None)`, `torch.finfo` read in the model's or the loss's code), so it computes
    the float32 loop's arithmetic in float64; the metadata's ``pinned`` lists what was pinned, ``unpinned``
    what could not be (a `torch.linalg` call with its dtype's default tolerance).
    With ``variants``, also records the variant of burn's arithmetic the loop meets (`variant_name`:
    `burn-adam` for Adam and AdamW, `burn-rmsprop` for RMSprop, `burn-batchnorm` for a BatchNorm in training, both
    joined by ``+``) at
    ``{stem}.{variant}.safetensors`` next to ``path`` (`reference_files` lists the files written), and names
    it in the reference's metadata (`variant.burn-adam`: the file name).
    ``progress`` is told the steps of each run, the variant's with its name as ``part``.

    A loss that is an `nn.Module` (``nn.CrossEntropyLoss(weight=w)``, a loss holding a frozen target network) is
    deep-copied to float64 with the model; a loss function is called as it is, on float64 tensors.

    Anything the loop does besides the optimizer's step must be an argument (``clip_grad_norm``,
    ``dropout``, ``lr_schedule``, as for `record`): a float64 re-run is made from the optimizer's
    class and settings, so step hooks registered on ``optimizer`` and an Adam whose ``step`` is
    overridden are refused rather than silently left out.

    ``full_steps`` and ``layer_statistics`` record steps and layers as statistics only, as `burnside.torch.record`
    does (give the reference the trace's own: compare refuses a reference holding only the statistics of a
    tensor both traces hold in full); the layer rule counts the model's parameters.
    """
    settings = LoopSettings(steps=steps, loss_fn=loss_fn, forward=forward if forward is not None else default_forward,
                            target=target, metadata=metadata, layer_inputs=layer_inputs,
                            clip_grad_norm=clip_grad_norm, dropout=dropout, lr_schedule=lr_schedule,
                            accumulate=accumulate, full_steps=full_steps, layer_statistics=layer_statistics)
    return record_loop_reference(model, optimizer, batches, path, settings, variants=variants, progress=progress)


def record_loop_reference(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Batch | Sequence[Batch],
                          path: str | Path, settings: LoopSettings, *, variants: bool = True,
                          progress: StepProgress | None = None) -> Path:
    """`record_reference` of the loop ``settings`` describe (`burnside.torch.record` calls this with its own).

    The float64 runs record every layer's input and output whatever ``settings.activations`` and
    ``settings.layer_inputs`` say (`record_reference(..., layer_inputs=False)` leaves them on)."""
    path = Path(path)
    check_model(model)
    _check_rerunnable(optimizer)
    if not isinstance(batches, Mapping):
        batches = list(batches)  # counted here, then read by each run
    check_full_steps(settings.full_steps, loop_steps(batches, settings.steps, settings.accumulate))  # before any run
    layer_statistics_for(model, settings.layer_statistics)
    if settings.dropout:
        _check_no_dropout(model)
    settings = replace(settings, activations=True, layer_inputs=True)
    found: dict[str, str] = {}
    name = variant_name(model, optimizer) if variants else None
    if name is not None:
        variant = variant_path(path, name)
        _record_variant(model, optimizer, batches, variant, name, settings, progress)
        found[name] = variant.name
        # the variant's float64 copy, its gradients and its optimizer's state are gone with its frame; collect
        # any cycle among them before the reference's copy is made, so the two copies are never alive together
        gc.collect()
    double, opt = _double_copy(model, optimizer, burn_adam=False)
    meta = {**(settings.metadata or {}), "reference": "float64", **{f"variant.{k}": v for k, v in found.items()}}
    double_loss = _double_loss(settings.loss_fn)
    with _float64_loss_errors(), Float32Constants(double, double_loss) as pins:
        return record_trace(double, opt, _double_batches(batches), path,
                            replace(settings, loss_fn=double_loss, metadata=_WithPins(meta, pins)), progress)


def record_forward_reference(
    model: nn.Module,
    batches: Batch | Sequence[Batch],
    path: str | Path,
    *,
    forward: Forward | None = None,
    eval: bool = True,  # noqa: A002 (record_forward's argument)
    activations: bool = True,
    layer_inputs: bool = True,
    metadata: Mapping[str, object] | None = None,
    progress: StepProgress | None = None,
    statistics: bool | None = None,
    full_steps: Sequence[int] | None = None,
) -> Path:
    """Record the float64 reference of `burnside.torch.record_forward`'s forward passes at ``path`` (or pass
    ``reference=path`` to `record_forward`, which calls this first, with its arguments).

    ``model`` runs in float64 (its floating-point parameters and buffers widened in place for the run and put back
    bit for bit after it: a model of N float32 bytes takes 2N while the reference runs, where the model beside a
    float64 deep copy took 3N), the batches' float tensors converted
    (integer ones, token ids and labels, kept as they are); the arguments mean what they mean for
    `record_forward`. The float64 run keeps the float32 model's dtype-dependent constants, as `record_reference`'s
    does (`Float32Constants`; metadata ``pinned``, ``unpinned``). The file is a forward trace of dtype float64,
    marked ``reference: float64`` as a
    training reference is, so `burnside compare A B --reference` takes it as the referee and refuses it as
    a side. No variant is recorded: a forward pass meets none of burn's known arithmetic differences
    (Adam's constants are an optimizer's, BatchNorm's biased variance a running statistic no output reads).
    With ``statistics`` (decided on the float32 model, as `record_forward` decides it), the reference records the
    same names as statistics as the trace: its float64 parameters (compare checks the reference starts where the
    trace does from their mean, norm and largest magnitude, which a float32 tensor widened to float64 keeps
    exactly) and the layers of the batches not in ``full_steps``; at the full batches it holds every layer in full,
    so the referee judges there as without statistics.
    """
    per_batch = batch_list(batches)
    check_forward_model(model)
    statistics = forward_statistics(model, statistics, full_steps, len(per_batch)) is not None
    full_steps = forward_statistics(model, statistics, full_steps, len(per_batch)) if statistics else None
    with _float64_in_place(model) as double, _float64_loss_errors(), Float32Constants(double) as pins:
        return record_forward_trace(double, _double_batches(per_batch), path, forward=forward, eval=eval,
                                    activations=activations, layer_inputs=layer_inputs,
                                    metadata=_WithPins({**(metadata or {}), "reference": "float64"}, pins),
                                    progress=progress, statistics=statistics, full_steps=full_steps)


def record_generate_reference(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    path: str | Path,
    *,
    steps: int = 8,
    step: Callable | None = None,
    activations: bool = True,
    layer_inputs: bool = True,
    metadata: Mapping[str, object] | None = None,
    progress: StepProgress | None = None,
    statistics: bool | None = None,
    full_steps: Sequence[int] | None = None,
) -> Path:
    """Record the float64 reference of `burnside.torch.record_generate`'s greedy generation at ``path`` on its
    own (``reference=path`` records it with the trace, in one call): the loop is run as given to choose the
    tokens, then its steps, teacher-forced with them, in float64, as `record_forward_reference` runs a forward
    trace's batches. The same file as `record_generate(..., reference=path)` writes, so a large model's trace
    and reference can be recorded by separate processes, each holding one copy of the weights."""
    from burnside.recording.generate import generation_full_steps, generation_inputs

    batches, forward, meta = generation_inputs(model, prompt_ids, steps, step, metadata)
    return record_forward_reference(model, batches, path, forward=forward, activations=activations,
                                    layer_inputs=layer_inputs, metadata=meta, progress=progress, statistics=statistics,
                                    full_steps=generation_full_steps(model, statistics, full_steps, steps))


@contextmanager
def _float64_in_place(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` itself with its floating-point parameters and buffers widened to float64 for the block, each put
    back to its own dtype after it, bit for bit (every float32, float16 and bfloat16 value is a float64 one), and
    the constants `Float32Constants` pins on it restored.

    A forward reference changes no parameter, so it needs no copy: `copy.deepcopy(model).double()` kept the float32
    model beside its float64 copy, 12 bytes per float32 parameter (a 1.24 B-parameter Llama: 14.8 GB, over 12 GiB),
    where this holds the float64 tensors and the one tensor being widened, 8 bytes per parameter. Shared
    parameters (a tied lm_head) are one tensor and stay shared."""
    widened: list[tuple[torch.Tensor, torch.dtype]] = []
    eps = [(module, module.eps) for module in model.modules() if isinstance(module, nn.RMSNorm)]
    try:
        # parameters() and buffers() give a shared tensor once
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point() and tensor.dtype != torch.float64:
                widened.append((tensor, tensor.dtype))
                tensor.data = tensor.data.double()  # the narrower storage is freed here, tensor by tensor
        yield model
    finally:
        for tensor, dtype in widened:
            tensor.data = tensor.data.to(dtype)
        for module, value in eps:
            module.eps = value


__all__ = ["BURN_ADAM", "BURN_BATCHNORM", "BURN_MUON", "BURN_RMSPROP", "has_burn_muon_variant",
           "has_burn_rmsprop_variant", "F32_EPS", "Float32Constants", "has_batchnorm", "has_burn_adam_variant",
           "record_forward_reference", "record_generate_reference",
           "record_loop_reference", "record_reference", "reference_files", "variant_name", "variant_path"]

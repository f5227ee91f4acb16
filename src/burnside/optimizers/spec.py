"""What burnside knows of one optimizer, on both sides: the `Optimizer` each module of `burnside.optimizers` defines
(`OPTIMIZER`), and the `Step` its replay reads.

Each field is read by one stage: the recorder (`torch_class`, `torch_settings`, `unused_slots`), the float64
reference (`burn_variant`), the comparison of settings (`compared`, `own_eps`), the optimizer forensics (`new_fits`,
`replay`, `reads_whole`, `measured`, `clipping`, `flags`), D005 (`d005_fixes`), D009 (`d009_fix`) and the catalogue
(the `burn_*` fields), and `burnside run a1` (`a1_names`, `a1_settings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from burnside.trace import Trace


#: The state slots a trace records: PyTorch's state names, which are the trace's slot names already
#: (docs/trace-format.md).
SLOTS = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg", "grad_avg", "sum", "row_var",
         "col_var", "variance", "step")


@dataclass(frozen=True)
class Step:
    """Step ``k`` of parameter ``param`` as a replay reads it."""

    trace: Trace
    #: the declared settings, the parameter's group's over the first group's
    config: dict
    #: the optimizer's name in the trace (`adam` or `adamw` for Adam's replay)
    name: str
    k: int
    param: str
    #: the rate this step declares (a schedule's, scaled by the group's lr) and the group's weight decay
    lr: float
    weight_decay: float
    #: the declared clipping's factor for this step (1 without clipping)
    coef: float
    #: the first `replay.SAMPLE` elements of the parameter before and after the step and of its recorded (unclipped)
    #: gradient, flat, in float64; None for a replay that reads its tensors whole (`Optimizer.reads_whole`)
    before: np.ndarray | None = None
    after: np.ndarray | None = None
    grad: np.ndarray | None = None


@dataclass(frozen=True)
class BurnVariant:
    """burn-optim 0.22.1's arithmetic of an optimizer where it differs from PyTorch's (float32 constants, another
    order): the float64 reference records a second run with it, a *variant* (`burnside.recording.reference`), so the
    comparison can tell the framework's own arithmetic from a port's mistake."""

    #: its name in a reference's metadata (`burn-adam`)
    name: str
    #: the class name of the variant's torch.optim optimizer (its trace's `optimizer.class`)
    class_name: str
    #: (one parameter group of the recorded torch.optim optimizer, that optimizer's kind) -> the settings the update
    #: reads, each group's its own
    settings: Callable[[Mapping, str], dict]
    #: (a float64 parameter with its gradient, its state, its group's settings) -> None: one update in place, under
    #: `torch.no_grad()` (torch imported inside it)
    update: Callable[[Any, dict, Mapping], None]
    #: the settings a group may leave out, with their values
    defaults: Mapping[str, Any] = field(default_factory=dict)


def _settings(fits: Any, lr: float) -> dict[str, float]:
    return fits.settings()


@dataclass(frozen=True)
class Optimizer:
    """One optimizer: its name in a trace and how each stage reads it."""

    #: its name in a trace's metadata (`optimizer.name`)
    name: str
    #: the torch.optim class (its name) whose step it is
    torch_class: str
    #: one parameter group of the torch.optim optimizer -> the trace's settings (docs/trace-format.md); torch is
    #: imported inside it where it needs it
    torch_settings: Callable[[Mapping], dict]
    #: state slots torch.optim keeps that do not enter its update and burn does not keep: not recorded
    unused_slots: tuple[str, ...] = ()
    #: settings torch.optim reads from the optimizer's constructor (its `defaults`) whatever a group says (Adagrad's
    #: initial_accumulator_value): recorded from there, and given to the float64 copy's constructor
    constructor_settings: tuple[str, ...] = ()
    #: (a parameter's state, the optimizer's defaults) -> whether it is what the constructor made before any step
    #: (Adagrad's), which the float64 copy makes anew; None: a fresh optimizer has no state
    fresh_state: Callable[[Mapping, Mapping], bool] | None = None
    #: burn's arithmetic where it is not PyTorch's, which the float64 reference records as a variant; None where burn
    #: computes what PyTorch computes
    burn_variant: BurnVariant | None = None
    #: its own settings compared between the sides (D005), beyond those `settings.SHARED_KEYS` lists
    compared: tuple[str, ...] = ()
    #: whether its epsilon is compared with the other settings (Adam's is D004's, measured from the numbers)
    own_eps: bool = False
    #: a fresh set of the rows its settings are fitted on; None: its updates are not replayed
    new_fits: Callable[[], Any] | None = None
    #: (a step, the fits to add to) -> (what the replay misses, its residual), or None when it reproduces the step
    replay: Callable[[Step, Any], tuple[str, float] | None] | None = None
    #: whether its replay reads whole tensors (`Step.before`, `after` and `grad` are then None)
    reads_whole: bool = False
    #: (its fits, the declared lr) -> the settings they show
    measured: Callable[[Any, float], dict[str, float]] = _settings
    #: (its fits, measured, lr_by_step, steps, clip, norm(k), the declared rate of step k): where the updates show a
    #: gradient clipping other than the declared one, put it in ``measured`` (and take out what it explains)
    clipping: Callable[..., None] | None = None
    #: settings only its fits measure, as D009 judges them: measured key -> (the trace's key, the index in a list
    #: value, the absolute floor below which the fit cannot resolve it)
    fitted: Mapping[str, tuple[str, int | None, float]] = field(default_factory=dict)
    #: its flags a search for the optimizer as built may switch (`forensics.optimizer._candidates`)
    flags: tuple[str, ...] = ()
    #: burn's config it is built from by hand (`AdamWConfig`; SGD's momentum `MomentumConfig`)
    burn_config: str | None = None
    #: every setting of that config built with `new()`, by the trace's keys (Adam's betas as `beta_1`, `beta_2`)
    burn_new: Mapping[str, float | bool] = field(default_factory=dict)
    #: each setting's builder call on that config (`{}` its value)
    burn_setters: Mapping[str, str] = field(default_factory=dict)
    #: the config built by hand with every declared value where burn's default differs, where the setters alone do
    #: not build it (SGD's whole `MomentumConfig`)
    burn_code: Callable[[dict], str] | None = None
    #: the catalogue case measuring burn's defaults that differ from PyTorch's, and burn's value of each
    burn_defaults: tuple[str, tuple[tuple[str, float], ...]] | None = None
    #: the burn setter the catalogue names for them (a diagnosis whose fix calls it already gives it)
    burn_defaults_setter: str = ""
    #: D005's fix of a setting of this optimizer (on the burn side), where it is not the setting's own fix
    d005_fixes: Mapping[str, str] = field(default_factory=dict)
    #: (a setting its updates contradict, its declared value, the optimizer's name) -> D009's fix of it, or None
    #: where the fix is to build the optimizer from the declared spec
    d009_fix: Callable[[str, Any, str], str | None] | None = None
    #: the names `burnside run a1 --optim` gives it (SGD also `momentum`)
    a1_names: tuple[str, ...] = ()
    #: the PyTorch settings `--optim NAME:key=value,...` may give it on A1 (read the same way by rust/a1)
    a1_settings: tuple[str, ...] = ()


__all__ = ["SLOTS", "BurnVariant", "Optimizer", "Step"]

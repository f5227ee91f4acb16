"""A1's burn side: build `train-step` and record its trace (`burnside run a1`).

The PyTorch side of A1, with the seed's numbers, is `burnside.examples.a1`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from burnside.examples.a1 import optimizer_settings
from burnside.burn.binary import run_binary
from burnside.burn.cargo import build_workspace

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: The porting bugs that `a1-bugs`'s `bugs` program can build into the A1 loop (see its doc).
BUGS = ("discard", "othergrads", "epsilon", "rmsprop-defaults", "adagrad-eps", "muon-decay", "adafactor-absolute",
        "lbfgs-max-iter", "skipstep", "literallr", "betas", "weightdecay", "dampening", "clip",
        "double", "sum", "gelu", "nobias", "f32inputs", "init")
#: Bugs that live in one kind of optimizer: bug -> (the optimizers it needs, what it is).
BUG_OPTIMS = {
    "epsilon": (("adam",), "Adam's default epsilon"),
    "betas": (("adam",), "an Adam beta_2"),
    "rmsprop-defaults": (("rmsprop",), "burn's default RMSprop momentum and epsilon"),
    "adagrad-eps": (("adagrad",), "burn's default Adagrad epsilon"),
    "muon-decay": (("muon",), "burn's default Muon weight decay (none)"),
    "adafactor-absolute": (("adafactor",), "an Adafactor with burn's relative step and parameter scaling off"),
    "lbfgs-max-iter": (("lbfgs",), "burn's default L-BFGS iterations per step"),
    "dampening": (("momentum",), "burn's default momentum dampening"),
    "weightdecay": (("sgd", "momentum"), "an SGD weight decay"),
    "clip": (("sgd", "momentum"), "an SGD gradient clipping"),
}


def record_a1(out: Path, *, steps: int = 1, optim: str = "sgd", console: Console | None = None,
              f32_inputs: bool = False, init: Path | None = None, bug: str | None = None,
              progress: StepProgress | None = None) -> Path:
    """Record ``steps`` steps of A1 on burn (one of `burnside.examples.a1.OPTIMS`, as
    `burnside.examples.a1.a1_optimizer`; RMSprop, Adagrad, Adafactor, Muon and L-BFGS also as ``NAME:key=value,...``
    with PyTorch's settings) into ``out``.

    The model and batch are built in Rust (f64, rounded once); ``f32_inputs`` computes inputs
    and biases in f32 instead (S3); ``init`` loads a `burnside.torch.export_init` file instead.
    ``bug`` (one of BUGS) records the loop with that failure built in (`a1-bugs`'s `bugs`).
    ``progress`` is told the steps the program reports; the build's progress goes to ``console``.
    """
    optimizer_settings(optim)  # one of A1's optimizers, with settings the burn side reads the same way
    if bug is not None and (bug not in BUGS or f32_inputs or init is not None):
        raise ValueError(f"bug must be one of {BUGS}, without f32_inputs or init")
    out = Path(out)
    binary = build_workspace(console).executables["bugs" if bug else "train-step"]
    args = ["-o", str(out), "--steps", str(steps), "--optim", optim]
    if bug is not None:
        args += ["--bug", bug]
    if f32_inputs:
        args.append("--f32-inputs")
    if init is not None:
        args += ["--init", str(init)]
    out.unlink(missing_ok=True)
    run_binary(binary, args, expect_file=out, progress=progress)
    return out

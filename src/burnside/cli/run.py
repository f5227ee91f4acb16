"""`burnside run NAME`: a model of this repository on both sides (or one), compared."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from burnside.burn.a1 import BUG_OPTIMS
from burnside.burn.a1 import BUGS as A1_BUGS
from burnside.cli.command import BurnsideCommand
from burnside.cli.options import comparison_options, tolerances_from
from burnside.cli.output import finish, stderr, stdout
from burnside.errors import BurnsideError
from burnside.pipeline import record_and_compare
from burnside.progress import Progress
from burnside.targets import TARGETS, get_target
from burnside.trace.limits import MAX_STEPS

_OPTIMS = sorted({optim for target in TARGETS.values() for optim in target.optims})


@click.command(cls=BurnsideCommand)
@click.argument("name", metavar="NAME")
@click.option("--side", type=click.Choice(["both", "torch", "burn"]), default="both", show_default=True,
              help="Run both sides and compare, or record one side only.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="With --side torch|burn: the trace file to write.")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("burnside-out"),
              show_default=True, help="Where traces and plots go.")
@click.option("--steps", "--batches", "steps", type=click.IntRange(1, MAX_STEPS), default=None,
              help="Training steps, or forward batches for an inference example (default 1; classifier and "
              "encoder: 3 batches).")
@click.option("--optim", type=click.Choice(_OPTIMS), default=None,
              help="The optimizer (" + "; ".join(f"{t.name}: {', '.join(t.optims)}" for t in TARGETS.values()
                                                 if t.optims)
              + "; the first is the default, each with the settings NAME's description above gives).")
@click.option("--bug", default=None, help="Build a porting bug into the burn side, to see burnside name it "
              f"(a1: {', '.join(A1_BUGS)}; cnn: bn-eps, bn-momentum; transformer: gelu-tanh, ln-eps; "
              "rnn: batch-first, no-clip, per-tensor-clip; attention: dropout, no-warmup; "
              "classifier: bn-train, stride, "
              "padding, no-running-stats, dropout-on; encoder: ln-eps, gelu-tanh, gates, transposed, time-axis).")
@click.option("--no-reference", is_flag=True,
              help="Do not record the float64 reference run (on by default: it is cheap for these models).")
@comparison_options
def run(name, side, output, out_dir, steps, optim, bug, no_reference, tol, rtol, ulps, tolerances_file, only,
        skip, reference, as_json, plot, junit, report) -> None:
    """Train NAME on PyTorch and on burn from the same bits, and compare every tensor."""
    say = stderr if as_json else stdout  # progress off stdout when it carries JSON
    target = get_target(name)
    steps = steps or target.default_steps
    if target.forward:
        if optim is not None:
            raise BurnsideError(f"{target.name} runs forward passes only, with no optimizer: drop --optim {optim}")
    else:
        optim = optim or target.optims[0]
        if optim not in target.optims:
            raise BurnsideError(f"{target.name} trains with {' or '.join(target.optims)}, not {optim}")
    if output is not None and side == "both":
        raise BurnsideError("-o names one trace file; use it with --side torch or --side burn (or use --out-dir)")
    if bug is not None:
        if bug not in target.bugs:
            raise BurnsideError(f"--bug {bug}: {target.name}'s burn side knows {', '.join(target.bugs) or 'no bugs'}")
        if side == "torch":
            raise BurnsideError("--bug changes the burn side; use it with --side burn or both")
        needs = BUG_OPTIMS.get(bug)
        if needs is not None and optim not in needs[0]:
            raise BurnsideError(f"--bug {bug} is {needs[1]}; add --optim {' or '.join(needs[0])}")
    torch_stem = f"{target.name}-{steps}" if target.forward else f"{target.name}-{optim}-{steps}"
    done = f"{steps} batch(es) forward" if target.forward else f"{steps} step(s) of {optim}"
    stem = torch_stem + (f"-{bug}" if bug else "")  # the PyTorch side has no bug to name
    run_dir = out_dir / target.name

    def torch_side(path: Path) -> Path:
        recorded = target.record_torch(path, steps=steps, optim=optim, progress=progress.steps("recording pytorch"))
        say.print(Text(f"torch side: {done} → {recorded}", style="dim"))
        return recorded

    def burn_side(path: Path, torch_trace: Path | None) -> Path:
        recorded = target.record_burn(path, torch_trace, steps=steps, optim=optim, bug=bug, console=stderr,
                                      progress=progress.steps("running the burn side"))
        say.print(Text(f"burn side: {done} → {recorded}", style="dim"))
        return recorded

    if side != "both":
        path = output or run_dir / f"{torch_stem if side == 'torch' else stem}.{side}.safetensors"
        if output is None:
            run_dir.mkdir(parents=True, exist_ok=True)
        with Progress(stderr) as progress:
            if side == "torch":
                torch_side(path)
            else:
                burn_side(path, None)
        return
    if reference is not None and no_reference:
        raise BurnsideError("--reference and --no-reference contradict each other; drop one")

    def reference_side(path: Path) -> Path:
        recorded = target.record_reference(path, steps=steps, optim=optim,
                                           progress=progress.steps("recording the float64 reference"))
        say.print(Text(f"reference: {done} in float64 → {recorded}", style="dim"))
        return recorded

    if reference is None and not no_reference and target.record_reference is not None:
        reference = reference_side
    run_dir.mkdir(parents=True, exist_ok=True)
    with Progress(stderr) as progress:
        parity = record_and_compare(torch_side, burn_side, torch_out=run_dir / f"{torch_stem}.torch.safetensors",
                                    burn_out=run_dir / f"{stem}.burn.safetensors",
                                    tolerances=tolerances_from(tol, rtol, ulps, tolerances_file, target.atol),
                                    only=only, reference=reference,
                                    reference_out=run_dir / f"{torch_stem}.reference.safetensors",
                                    progress=progress.tensors(), skip=skip)
    if plot is None and steps > 1 and not as_json and not target.forward:  # a forward trace has no loss curve
        plot = run_dir / f"{stem}.png"
    finish(parity.comparison, parity.diagnoses, as_json=as_json, plot=plot, junit=junit, report=report)


run.help = f"{run.help}\n\nNAME is one of: {', '.join(f'{t.name} ({t.title})' for t in TARGETS.values())}."

"""The seed pages' experiments (S1-S16), each runnable from one command.

Each experiment is a module `sNN_name.py` in this package defining
`EXPERIMENT = Experiment(...)`. Its `run(ctx)` prints what the seed page prints and
returns the page's claims, checked against what actually ran.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.text import Text

from burnside.errors import BurnsideError

_MODULE = re.compile(r"^s(\d\d)_\w+$")


@dataclass
class Context:
    """What an experiment gets: where to print, where to write, whether to show progress."""

    console: Console
    workdir: Path
    progress: bool = True


@dataclass
class ExperimentResult:
    """The page's claims as (text, held) pairs."""

    claims: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every claim held (an experiment with no claims has not shown anything)."""
        return bool(self.claims) and all(ok for _, ok in self.claims)


@dataclass(frozen=True)
class Experiment:
    """One item of shared/docs/seed-inventory.md."""

    id: str
    title: str
    page: str
    sides: tuple[str, ...]
    run: Callable[[Context], ExperimentResult]


def all_experiments() -> list[Experiment]:
    """Every experiment module in this package, in S-number order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if _MODULE.match(info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append(module.EXPERIMENT)
    return sorted(found, key=lambda e: int(e.id[1:]))


def get_experiment(experiment_id: str) -> Experiment:
    """Look up `S5` (or `s5`, `S05`)."""
    wanted = experiment_id.upper().lstrip("S").lstrip("0")
    for experiment in all_experiments():
        if experiment.id[1:] == wanted:
            return experiment
    known = ", ".join(e.id for e in all_experiments())
    raise BurnsideError(f"unknown experiment {experiment_id!r}; known: {known} (see `burnside experiments list`)")


def record_a1_pair(ctx: Context, stem: str, *, f32_inputs: bool = False, tolerances=None):
    """One SGD step of A1 on both sides, compared: the `record_and_compare` the S1-S3 pages run."""
    from burnside.examples.a1 import record_torch
    from burnside.burn.a1 import record_a1
    from burnside.pipeline import record_and_compare

    return record_and_compare(
        lambda path: record_torch(path, steps=1, optim="sgd"),
        lambda path, _: record_a1(path, steps=1, optim="sgd", f32_inputs=f32_inputs,
                                  console=ctx.console if ctx.progress else None),
        torch_out=ctx.workdir / "a1.torch.safetensors", burn_out=ctx.workdir / f"{stem}.burn.safetensors",
        tolerances=tolerances)


def run_experiment(experiment: Experiment, ctx: Context) -> ExperimentResult:
    """Run one experiment, then print each claim with its check mark."""
    ctx.console.print(Text(f"{experiment.id} · {experiment.title} (seed page {experiment.page})", style="bold"))
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    result = experiment.run(ctx)
    for text, ok in result.claims:
        mark = Text("✓ " if ok else "✗ ", style="bold green" if ok else "bold red")
        ctx.console.print(mark + Text(f"{text}: {str(ok).lower()}"))
    if not result.claims:
        ctx.console.print(Text("✗ this experiment checked no claim", style="bold red"))
    return result


__all__ = ["Context", "Experiment", "ExperimentResult", "all_experiments", "get_experiment", "record_a1_pair",
           "run_experiment"]

"""The `burnside` command line: parses arguments, calls the library, renders, picks the exit code."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from burnside.compare import Comparison, Tolerance, Tolerances, compare_traces, load_tolerances
from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.report.table import render
from burnside.trace import convert_trace, open_trace

app = typer.Typer(
    name="burnside",
    help="Prove a burn port of a PyTorch training loop trains the same; name the silent failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False)


class Side(str, Enum):
    both = "both"
    torch = "torch"
    burn = "burn"


class Optim(str, Enum):
    sgd = "sgd"
    adam = "adam"


class Bug(str, Enum):
    """The pages' silent failures (burnside.burn.a1.BUGS)."""

    discard = "discard"
    othergrads = "othergrads"
    epsilon = "epsilon"


def _tolerances(tol: float, rtol: float, ulps: int | None, tolerances: Path | None) -> Tolerances:
    default = Tolerance(atol=tol, rtol=rtol, ulps=ulps)
    return load_tolerances(tolerances, default) if tolerances else Tolerances(default)


def _report(comparison: Comparison, as_json: bool) -> int:
    """Print table + diagnosis (or JSON); return compare's exit code."""
    diagnoses = diagnose(comparison)
    if as_json:
        doc = comparison.to_dict() | {"diagnosis": [d.to_dict() for d in diagnoses]}
        typer.echo(json.dumps(doc, indent=1))
    else:
        render(comparison, console)
        for d in diagnoses:
            console.print(Text(f"{d.rule} {d.title}: ", style="bold magenta") + Text(d.evidence))
            console.print(Text(f"  fix: {d.fix}", style="magenta"))
    return 0 if comparison.passed else 1


@app.command()
def compare(
    a: Path = typer.Argument(..., help="Trace A (the reference, usually PyTorch): .safetensors or .json."),
    b: Path = typer.Argument(..., help="Trace B (usually burn)."),
    tol: float = typer.Option(1e-6, "--tol", help="Absolute tolerance per element."),
    rtol: float = typer.Option(0.0, "--rtol", help="Relative tolerance (|a-b| <= tol + rtol*|b|)."),
    ulps: int | None = typer.Option(None, "--ulps", help="Also accept elements within this many ULPs."),
    only: str | None = typer.Option(None, "--only", help="Compare only names matching this glob."),
    tolerances: Path | None = typer.Option(None, "--tolerances", help="Per-tensor tolerances (.toml/.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON."),
    plot: Path | None = typer.Option(None, "--plot", help="Also write a PNG of loss and drift per step."),
) -> None:
    """Compare two traces tensor by tensor (exit 0 within tolerance, 1 mismatch, 2 unusable input)."""
    comparison = compare_traces(open_trace(a), open_trace(b), _tolerances(tol, rtol, ulps, tolerances), only)
    code = _report(comparison, as_json)
    if plot is not None:
        from burnside.report.plot import plot_drift

        plot_drift(comparison, plot)
        err_console.print(Text(f"plot: {plot}", style="dim"))
    raise typer.Exit(code)


@app.command()
def convert(
    src: Path = typer.Argument(..., help="A trace, .safetensors or .json."),
    dst: Path = typer.Argument(..., help="Where to write it; the suffix picks the form."),
) -> None:
    """Rewrite a trace in the other form, bit for bit."""
    convert_trace(src, dst)
    console.print(f"wrote {dst}")


@app.command("run")
def run_target(
    target: str = typer.Argument(..., help="What to run: a1 (the seed's model)."),
    side: Side = typer.Option(Side.both, "--side", help="Run both sides and compare, or one side only."),
    output: Path | None = typer.Option(None, "-o", "--output", help="With --side torch|burn: the trace file."),
    out_dir: Path = typer.Option(Path("burnside-out"), "--out-dir", help="Where traces and plots go."),
    steps: int = typer.Option(1, "--steps", min=1, help="Training steps."),
    optim: Optim = typer.Option(Optim.sgd, "--optim", help="sgd (lr 0.1) or adam (lr 0.01, eps 1e-8)."),
    tol: float = typer.Option(1e-6, "--tol", help="Absolute tolerance per element."),
    rtol: float = typer.Option(0.0, "--rtol", help="Relative tolerance (|a-b| <= tol + rtol*|b|)."),
    ulps: int | None = typer.Option(None, "--ulps", help="Also accept elements within this many ULPs."),
    tolerances: Path | None = typer.Option(None, "--tolerances", help="Per-tensor tolerances (.toml/.json)."),
    bug: Bug | None = typer.Option(None, "--bug", help="Build one of the pages' silent failures into the "
                                      "burn side, to see burnside name it."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Run the seed's A1 training step on PyTorch and burn, and compare every tensor."""
    if target.lower() != "a1":
        raise BurnsideError(f"unknown target {target!r}; the one target so far is a1")
    if output is not None and side is Side.both:
        raise BurnsideError("-o names one trace file; use it with --side torch or --side burn (or use --out-dir)")
    if bug is not None and side is Side.torch:
        raise BurnsideError("--bug changes the burn side; use it with --side burn or both")
    if bug is Bug.epsilon and optim is not Optim.adam:
        raise BurnsideError("--bug epsilon is Adam's default epsilon; add --optim adam")
    torch_stem = f"a1-{optim.value}-{steps}"
    stem = torch_stem + (f"-{bug.value}" if bug else "")  # the PyTorch side has no bug to name
    run_dir = out_dir / "a1"
    run_dir.mkdir(parents=True, exist_ok=True)
    traces: dict[str, Path] = {}
    if side in (Side.both, Side.torch):
        path = output or run_dir / f"{torch_stem}.torch.safetensors"
        with console.status("recording the PyTorch side (importing torch)…"):
            from burnside.a1 import record_torch

            traces["torch"] = record_torch(path, steps=steps, optim=optim.value)
        console.print(Text(f"torch side: {steps} step(s) of {optim.value} → {path}", style="dim"))
    if side in (Side.both, Side.burn):
        path = output or run_dir / f"{stem}.burn.safetensors"
        from burnside.burn.a1 import record_a1  # builds rust/train-step (progress shown), then runs it

        traces["burn"] = record_a1(path, steps=steps, optim=optim.value, console=console,
                                   bug=bug.value if bug else None)
        console.print(Text(f"burn side: {steps} step(s) of {optim.value} → {path}", style="dim"))
    if side is not Side.both:
        return
    comparison = compare_traces(open_trace(traces["torch"]), open_trace(traces["burn"]),
                                _tolerances(tol, rtol, ulps, tolerances))
    code = _report(comparison, as_json)
    if steps > 1 and not as_json:
        from burnside.report.plot import plot_drift

        png = plot_drift(comparison, run_dir / f"{stem}.png")
        console.print(Text(f"plot: {png}", style="dim"))
    raise typer.Exit(code)


@app.command()
def explain(rule_id: str = typer.Argument(..., help="A lint rule (BS001) or diagnosis rule (D001).")) -> None:
    """Print what a lint or diagnosis rule checks, why it matters, and how to fix it."""
    from rich.markdown import Markdown
    from rich.panel import Panel

    from burnside.diagnose import RULES as DIAGNOSIS_RULES
    from burnside.diagnose import rule_doc
    from burnside.lint.rules import RULES as LINT_RULES
    from burnside.lint.rules import rule as lint_rule

    lint = lint_rule(rule_id)
    if lint is not None:
        title = f"{lint.ID} ({lint.NAME}) · default severity: {lint.SEVERITY.value}"
        doc = lint.__doc__
    elif (diagnosis := rule_doc(rule_id)) is not None:
        title = f"{diagnosis.ID} ({diagnosis.TITLE}) · diagnosis rule of `burnside compare`"
        doc = diagnosis.__doc__
    else:
        known = ", ".join([*LINT_RULES, *sorted(r.ID for r in DIAGNOSIS_RULES)])
        raise BurnsideError(f"unknown rule {rule_id}; known rules: {known}")
    Console(highlight=False).print(Panel(Markdown(doc or ""), title=title, title_align="left"))


experiments_app = typer.Typer(help="The seed pages' experiments S1-S16.", no_args_is_help=True)
app.add_typer(experiments_app, name="experiments")


@experiments_app.command("list")
def experiments_list() -> None:
    """List the experiments: ID, seed page, sides, title."""
    from burnside.experiments import all_experiments

    for e in all_experiments():
        console.print(Text(f"{e.id:<4} page {e.page}  {'+'.join(e.sides):<11} {e.title}"))


@experiments_app.command("run")
def experiments_run(
    ids: list[str] = typer.Argument(..., help="Experiment IDs (S5 S10 ...) or `all`."),
    out_dir: Path = typer.Option(Path("burnside-out"), "--out-dir", help="Where experiments write files."),
) -> None:
    """Run experiments; each prints what its seed page prints and checks the page's claim."""
    from burnside.experiments import Context, all_experiments, get_experiment, run_experiment

    chosen = all_experiments() if [i.lower() for i in ids] == ["all"] else [get_experiment(i) for i in ids]
    failed = []
    for experiment in chosen:
        ctx = Context(console=console, workdir=out_dir / experiment.id.lower())
        if not run_experiment(experiment, ctx).passed:
            failed.append(experiment.id)
        console.print()
    if failed:
        console.print(Text(f"claims that did not hold: {', '.join(failed)}", style="bold red"))
        raise typer.Exit(1)


def main() -> None:
    """Console-script entry point: user errors become one red line and exit code 2."""
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting.
        code = app(standalone_mode=False)
    except BurnsideError as exc:
        err_console.print(Text("error: ", style="bold red") + Text(str(exc)), soft_wrap=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # permission denied, disk full, ...: the user's to fix, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        err_console.print(Text("error: ", style="bold red") + Text(f"{where}{exc.strerror or exc}"), soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("[bold red]aborted[/]")
        sys.exit(130)
    except Exception as exc:  # click's usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)


# --- commands -------------------------------------------------------------
# Each command module registers itself here; keep this list in pipeline order.

# lint: `burnside lint` (src/burnside/lint/command.py).
from burnside.lint.command import register as _register_lint  # noqa: E402

_register_lint(app)

# check: `burnside check`, a user's burn port against a PyTorch trace (src/burnside/burn/check.py).
from burnside.burn.check import register as _register_check  # noqa: E402

_register_check(app)

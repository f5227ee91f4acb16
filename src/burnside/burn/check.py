"""`burnside check`: build a user's burn port, run it from the PyTorch side's starting point, compare.

The contract with the port's binary (documented in `burnside check --help`):

    BIN --init INIT -o OUT [ARGS...]

INIT is an init file (`burnside.format = init`: `params.{path}` in PyTorch layout,
`inputs.{name}`), made here from the PyTorch trace's `step0.params_before.*` and
`step0.inputs.*`. The port loads it with `burnside_trace::InitFile` (which transposes Linear
weights into burn's layout), trains with the same steps and optimizer, records every stage
with `burnside_trace::TraceRecorder`, and writes OUT. `rust/train-step` is a complete example.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.text import Text

from burnside.burn.binary import run_binary
from burnside.burn.cargo import build
from burnside.errors import BurnsideError
from burnside.trace import Trace, open_trace, write_trace


def init_from_trace(trace: Trace, path: Path) -> Path:
    """The starting point of ``trace`` (its step 0 inputs and params_before) as an init file."""
    params = [n.removeprefix("step0.params_before.") for n in trace.names if n.startswith("step0.params_before.")]
    inputs = [n.removeprefix("step0.inputs.") for n in trace.names if n.startswith("step0.inputs.")]
    if not params or not inputs:
        raise BurnsideError(f"{trace.path}: has no step0.params_before.* or step0.inputs.*, so there is no "
                            "starting point to hand to the burn port")
    tensors = {f"params.{p}": np.array(trace.array(f"step0.params_before.{p}")) for p in params}
    tensors |= {f"inputs.{n}": np.array(trace.array(f"step0.inputs.{n}")) for n in inputs}
    return write_trace(path, tensors, {"params": params, "inputs": inputs}, kind="init")


def record_port(torch_trace: Path, burn_crate: Path, bin_name: str, args: list[str], out_dir: Path,
                console: Console | None = None) -> Path:
    """Build ``bin_name`` of the crate at ``burn_crate`` and run it on ``torch_trace``'s start; the burn trace."""
    if not (burn_crate / "Cargo.toml").is_file():
        raise BurnsideError(f"{burn_crate}: no Cargo.toml; --burn-crate takes the directory of the port's crate")
    out_dir.mkdir(parents=True, exist_ok=True)
    init = init_from_trace(open_trace(torch_trace), out_dir / "init.safetensors")
    binary = build(burn_crate, bins=[bin_name], console=console).executables[bin_name]
    out = out_dir / f"{bin_name}.burn.safetensors"
    out.unlink(missing_ok=True)
    run_binary(binary, ["--init", str(init), "-o", str(out), *args], expect_file=out)
    return out


def check(
    torch_trace: Path = typer.Option(..., "--torch-trace", help="The PyTorch side's trace (burnside.torch.record)."),
    burn_crate: Path = typer.Option(..., "--burn-crate", help="Directory of the burn port's crate (its Cargo.toml)."),
    bin_name: str = typer.Option(..., "--bin", help="The port's binary."),
    args: list[str] | None = typer.Argument(None, help="Passed to the binary after `--`."),
    out_dir: Path = typer.Option(Path("burnside-out/check"), "--out-dir", help="Where the init file and burn trace go."),
    tol: float = typer.Option(1e-6, "--tol", help="Absolute tolerance per element."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Build a burn port, run it as `BIN --init INIT -o OUT [ARGS]`, and compare its trace with PyTorch's.

    The port loads INIT (the PyTorch trace's starting point) with burnside_trace::InitFile and
    records its steps with burnside_trace::TraceRecorder into OUT; see rust/train-step.
    """
    from burnside.cli import _report, console
    from burnside.compare import Tolerance, Tolerances, compare_traces

    out = record_port(torch_trace, burn_crate, bin_name, list(args or []), out_dir, console)
    console.print(Text(f"burn side: {bin_name} → {out}", style="dim"))
    comparison = compare_traces(open_trace(torch_trace), open_trace(out), Tolerances(Tolerance(atol=tol)))
    raise typer.Exit(_report(comparison, as_json))


def register(app: typer.Typer) -> None:
    """Add `burnside check` to the CLI."""
    app.command("check")(check)

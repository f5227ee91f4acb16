"""`burnside check`: your burn port against your PyTorch trace."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from burnside.burn.port import record_port
from burnside.cli.command import BurnsideCommand
from burnside.cli.options import comparison_options, tolerances_from
from burnside.cli.output import finish, stderr, stdout
from burnside.errors import BurnsideError
from burnside.pipeline import record_and_compare
from burnside.progress import Progress


@click.command(cls=BurnsideCommand)
@click.option("--torch-trace", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="The PyTorch side's trace (burnside.torch.record).")
@click.option("--burn-crate", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Directory of the burn port's crate (its Cargo.toml).")
@click.option("--bin", "bin_name", required=True, help="The port's binary.")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("burnside-out/check"),
              show_default=True, help="Where the init file and the burn trace go.")
@click.option("--features", "features", multiple=True, metavar="LIST",
              help="The crate's cargo features to build with (comma-separated or repeated), as `cargo --features`.")
@click.option("--no-default-features", is_flag=True, help="Build the crate without its default features.")
@comparison_options
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def check(torch_trace, burn_crate, bin_name, out_dir, features, no_default_features, tol, rtol, ulps,
          tolerances_file, only, skip, reference, as_json, plot, junit, report, args) -> None:
    """Build a burn port, run it as `BIN --init INIT -o OUT [ARGS]`, compare its trace with PyTorch's.

    A training port loads INIT (the PyTorch trace's starting point, and its batch of every step where
    they differ) with burnside_trace::InitFile, trains with burnside_trace::Training and writes its trace
    to OUT, for `--steps N` steps. An inference port, checked against a forward trace
    (burnside.torch.record_forward), loads its weights its own way (burn-store from the checkpoint, or
    InitFile, which then also holds the buffers) and runs `--batches N` forward passes with
    burnside_trace::Inference. See rust/README.md. Arguments after `--` go to the binary (not -o or
    --init: the contract's). Pass a float64 reference (record(..., reference=PATH) or
    record_forward(..., reference=PATH)) with --reference to tell noise from bugs.
    """
    say = stderr if as_json else stdout  # progress off stdout when it carries JSON
    taken = sorted({a.split("=", 1)[0] for a in args} & {"-o", "--out", "--init"})
    if taken:
        raise BurnsideError(f"{', '.join(taken)} is the contract's own (check passes `--init INIT -o OUT` to the "
                            "binary itself): give where the traces go with --out-dir, and the binary's own options "
                            "after `--`")

    def burn_side(path: Path, torch: Path) -> Path:
        recorded = record_port(torch, burn_crate, bin_name, list(args), out_dir, stderr, out=path,
                               progress=progress.steps("running the burn port"),
                               features=[f for given in features for f in given.replace(",", " ").split()],
                               no_default_features=no_default_features)
        say.print(Text(f"burn side: {bin_name} → {recorded}", style="dim"))
        return recorded

    with Progress(stderr) as progress:
        parity = record_and_compare(torch_trace, burn_side, torch_out=torch_trace,
                                    burn_out=out_dir / f"{bin_name}.burn.safetensors",
                                    tolerances=tolerances_from(tol, rtol, ulps, tolerances_file), only=only,
                                    reference=reference, progress=progress.tensors(), skip=skip)
    finish(parity.comparison, parity.diagnoses, as_json=as_json, plot=plot, junit=junit, report=report)

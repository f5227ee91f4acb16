"""`burnside new NAME`: a ready port project (a burn crate and its PyTorch side) in a new folder."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from burnside.burn.scaffold import new_port
from burnside.cli.command import BurnsideCommand
from burnside.cli.output import stdout


@click.command(cls=BurnsideCommand)
@click.argument("name")
@click.option("--dir", "parent", type=click.Path(path_type=Path, file_okay=False), default=Path("."),
              show_default=True, help="The folder to make the project in.")
@click.option("--inference", is_flag=True,
              help="An inference port: a pretrained checkpoint loaded with burn-store, forward passes checked.")
@click.option("--generate", is_flag=True,
              help="A language model's generation: a Hugging Face Llama's checkpoint loaded with burn-store, its "
                   "greedy decode loop with a key/value cache checked step by step.")
def new(name: str, parent: Path, inference: bool, generate: bool) -> None:
    """Write a port project NAME: a burn crate (src/main.rs) depending on burnside-trace, the PyTorch
    model it ports (model.py) and the script that records it (record.py), checked OK as written.

    A training port by default (a few optimizer steps); with --inference, a port that loads the
    PyTorch checkpoint record.py saves, as production code does, and is checked forward only; with
    --generate, a language model's port (a Llama read from its config.json) whose decode loop with a
    key/value cache is checked step by step. Replace the model on both sides with yours; README.md in
    the project has the two commands.
    """
    if inference and generate:
        raise click.UsageError("--inference and --generate are two kinds of project: give one")
    dest = new_port(name, parent, "generation" if generate else "inference" if inference else "training")
    stdout.print(Text(f"wrote {dest}: Cargo.toml, .cargo/config.toml, src/main.rs, model.py, record.py, README.md"))
    stdout.print(Text("next:", style="bold"))
    command = (f"  cd {dest}\n  python record.py\n  burnside check --burn-crate . --bin {name} "
               "--torch-trace traces/torch.safetensors --reference traces/reference.safetensors")
    stdout.print(Text(command + (" -- --checkpoint checkpoint/model.safetensors" if generate else
                                 " -- --checkpoint checkpoint/model.pt" if inference else "")))

"""Session fixtures: burnside's burn programs built once, A1 traces recorded once per side."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnside.burn.cargo import CargoRun
from burnside.trace import Trace, open_trace


@pytest.fixture(scope="session")
def programs() -> CargoRun:
    """The Rust workspace, built once (the first build of burn takes minutes; later ones are no-ops)."""
    from burnside.burn.programs import built_programs

    return built_programs()


@pytest.fixture(scope="session")
def traces_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("a1-traces")


@pytest.fixture(scope="session")
def a1_trace(programs, traces_dir):
    """``a1_trace(side, optim, steps, f32_inputs=False) -> Trace``, each recorded once."""
    from burnside.examples.a1 import record_torch
    from burnside.burn.a1 import record_a1

    cache: dict[tuple, Trace] = {}

    def get(side: str, optim: str, steps: int, f32_inputs: bool = False) -> Trace:
        key = (side, optim, steps, f32_inputs)
        if key not in cache:
            path = traces_dir / f"{side}-{optim}-{steps}{'-f32' if f32_inputs else ''}.safetensors"
            if side == "torch":
                record_torch(path, steps=steps, optim=optim)
            else:
                record_a1(path, steps=steps, optim=optim, f32_inputs=f32_inputs)
            cache[key] = open_trace(path)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def example_run(programs, tmp_path_factory):
    """``example_run(name, steps, bug=None) -> (torch trace, burn trace)`` of a worked example
    (burnside.examples, its port in rust/NAME), each recorded once per session."""
    from burnside.burn.locate import rust_workspace
    from burnside.burn.port import record_port
    from burnside.examples import attention, cnn, rnn, transformer

    examples = {"cnn": cnn, "transformer": transformer, "rnn": rnn, "attention": attention}
    root = tmp_path_factory.mktemp("examples")
    torch_traces: dict[tuple, Path] = {}
    cache: dict[tuple, tuple[Trace, Trace]] = {}

    def get(name: str, steps: int, bug: str | None = None) -> tuple[Trace, Trace]:
        example = examples[name]
        if (name, steps) not in torch_traces:
            torch_traces[name, steps] = example.record_torch(root / f"{name}-{steps}.torch.safetensors", steps=steps)
        if (name, steps, bug) not in cache:
            args = ["--steps", str(steps), *(["--bug", bug] if bug else [])]
            burn = record_port(torch_traces[name, steps], rust_workspace() / name, example.BURN_BIN, args,
                               root / f"{name}-{steps}-{bug or 'faithful'}")
            cache[name, steps, bug] = (open_trace(torch_traces[name, steps]), open_trace(burn))
        return cache[name, steps, bug]

    return get

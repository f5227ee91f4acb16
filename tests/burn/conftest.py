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
    from burnside.a1 import record_torch
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

"""The suite's options: build the port with a porting bug, to see what a failing parity test prints."""

from __future__ import annotations

import pytest

#: The porting bugs rust/cnn can build in on purpose (its `--bug`); a real port has no such switch.
PORT_BUGS = ("bn-eps", "bn-momentum")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--port-bug", choices=PORT_BUGS, default=None,
                     help="run the CNN port with `--bug NAME`: bn-eps gives BatchNorm an epsilon of 1e-3 "
                          "(PyTorch's is 1e-5), bn-momentum a running-statistics momentum of 0.9 (PyTorch's 0.1)")


@pytest.fixture
def port_bug(request: pytest.FixtureRequest) -> list[str]:
    """The port's extra arguments: `--bug NAME` under `--port-bug NAME`, none otherwise."""
    bug = request.config.getoption("--port-bug")
    return ["--bug", bug] if bug else []

"""The documents' tests share one `burnside new` project of each kind, made by README.md's own blocks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import README_INFERENCE, README_PORT, block


@pytest.fixture(scope="session")
def shell(tmp_path_factory):
    """``shell(text, cwd) -> CompletedProcess``: ``text`` run by bash (-e, pipefail) in ``cwd``, with this
    interpreter's `burnside` and `python` first on PATH."""
    shims = tmp_path_factory.mktemp("shims")
    (shims / "burnside").write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from burnside.cli import main; main()" '
                                    '"$@"\n')
    (shims / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(text: str, cwd: Path, timeout: int = 1800) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def port_project(shell, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """README.md's port block, run in an empty folder: the project it made, and the run."""
    parent = tmp_path_factory.mktemp("readme-port")
    return parent / "myport", shell(block(*README_PORT).text, parent)


@pytest.fixture(scope="session")
def inference_project(shell, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    parent = tmp_path_factory.mktemp("readme-inference")
    return parent / "myinfer", shell(block(*README_INFERENCE).text, parent)



"""The one packaging step pyproject.toml cannot declare: the wheel carries burnside's Cargo workspace.

`burnside run`, `burnside check` and `burnside new` build burn programs from `rust/` (burnside-trace,
the examples' ports, A1's programs) with the Cargo.lock burnside builds with, so an installed burnside
needs those sources. They are copied into the package as `burnside/_rust/` (sources and Cargo.lock only,
no build output); an editable install reads `rust/` of the checkout instead (burnside.burn.cargo).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RUST = Path(__file__).resolve().parent / "rust"


class BuildPyWithRustWorkspace(build_py):
    """build_py, then the workspace's sources next to the package's modules."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's rust/ directly
            return
        dest = Path(self.build_lib) / "burnside" / "_rust"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(RUST, dest, ignore=shutil.ignore_patterns("target", "*.tmp", "__pycache__"))


setup(cmdclass={"build_py": BuildPyWithRustWorkspace})

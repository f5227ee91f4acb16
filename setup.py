"""The packaging steps pyproject.toml cannot declare: the wheel carries burnside's Cargo workspace, and a
build writes nothing into the source tree.

`burnside run`, `burnside check` and `burnside new` build burn programs from `rust/` (burnside-trace,
the examples' ports, A1's programs) with the Cargo.lock burnside builds with, so an installed burnside
needs those sources. They are copied into the package as `burnside/_rust/` (sources and Cargo.lock only,
no build output); an editable install reads `rust/` of the checkout instead (burnside.burn.cargo).

setuptools builds in `build/` and writes `src/burnside.egg-info/` in the checkout by default, so two
installs or wheel builds from one checkout at once (four `pip install .` in CI jobs side by side) wrote
the same files: one copy's `_rust/` was deleted (`shutil.rmtree`) while another's wheel was being packed
from it, and that wheel lacked its Cargo.toml and burnside-trace. Each build here gets a private
temporary directory for both, removed when the build's process ends; `--build-base` or `--egg-base`
given to setuptools still win, the commands that choose their own (pip's metadata step, an editable
install) keep theirs, and an sdist is made as before (it carries src/burnside.egg-info).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build import build
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info

RUST = Path(__file__).resolve().parent / "rust"

_private: list[Path] = []


def _private_dir() -> Path:
    """This build's own temporary directory (one per process), removed at exit."""
    if not _private:
        _private.append(Path(tempfile.mkdtemp(prefix="burnside-build-")))
        atexit.register(shutil.rmtree, _private[0], True)
    return _private[0]


class PrivateBuild(build):
    """`build` with its build base (build/lib, build/bdist.*) in this build's private directory."""

    def initialize_options(self) -> None:
        super().initialize_options()
        self.build_base = str(_private_dir() / "build")


class PrivateEggInfo(egg_info):
    """`egg_info` writing burnside.egg-info into this build's private directory, not src/ (but for an sdist,
    which carries it, and which setuptools assembles in the current directory anyway)."""

    def initialize_options(self) -> None:
        super().initialize_options()
        if "sdist" not in self.distribution.commands:
            self.egg_base = str(_private_dir())


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


setup(cmdclass={"build": PrivateBuild, "egg_info": PrivateEggInfo, "build_py": BuildPyWithRustWorkspace})

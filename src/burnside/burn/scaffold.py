"""`burnside new NAME`: a port project of a user's own, outside any burnside checkout.

The project is a crate (its own workspace) that depends on the `burnside-trace` sources of the
installed burnside, with burn's features and the Cargo.lock burnside builds with, so its first
build reuses burn as `burnside run a1` built it in the shared target directory (where its
`.cargo/config.toml` points cargo, so a plain `cargo build --release` reuses it too); a PyTorch model
and the script that records it; a README with the two commands. `burnside check` on it is OK as
written (tests/burn/test_new_port.py). Two kinds: a training port (`templates/port`: a few
optimizer steps, `burnside_trace::Training`) and an inference port (`templates/inference`: a
pretrained checkpoint loaded with burn-store, forward passes with `burnside_trace::Inference`).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from burnside.atomic import write_atomic
from burnside.burn.locate import rust_workspace, target_dir, trace_crate
from burnside.errors import BurnsideError, stops_deferred

#: A crate name cargo takes as a package and binary name.
_CRATE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

#: Template file -> where it goes in the project.
_FILES = {
    "Cargo.toml.in": "Cargo.toml",
    "src/main.rs": "src/main.rs",
    "model.py": "model.py",
    "record.py": "record.py",
    "README.md": "README.md",
    "gitignore": ".gitignore",
}


def _toml_string(path: Path) -> str:
    """``path`` as the inside of a TOML basic string."""
    return str(path).replace("\\", "\\\\").replace('"', '\\"')


def cargo_config() -> str:
    """The project's `.cargo/config.toml`: cargo run in it builds where `burnside check` builds (`target_dir()`,
    as an absolute path), so a plain `cargo build --release` (`cargo run --release`, `cargo test --release`)
    reuses burn's build there instead of building burn anew into ./target."""
    return ("# Written by `burnside new`: cargo builds this crate in the target directory `burnside check` builds it\n"
            "# in (CARGO_TARGET_DIR when the project was made, else ~/.cache/burnside/cargo-target), where burn is\n"
            "# already built: `cargo build --release`, `cargo run --release` or `cargo test --release` here takes\n"
            "# seconds, not a cold build of burn into ./target (without --release, cargo's dev profile builds burn\n"
            "# once more, in that directory's debug/). Remove this file to build into ./target.\n"
            f'[build]\ntarget-dir = "{_toml_string(_target())}"\n')


def _target() -> Path:
    """The target directory `burnside check` builds in, as an absolute path (a relative CARGO_TARGET_DIR is
    taken from the folder `burnside new` runs in)."""
    return Path(os.path.abspath(target_dir()))


#: The kinds of project `new_port` writes, each its template folder.
KINDS = {"training": "port", "inference": "inference", "generation": "generate"}


def new_port(name: str, parent: Path, kind: str = "training") -> Path:
    """Write the port project ``parent/name`` of ``kind`` (a `KINDS` key); its path. Nothing is left
    behind if it fails."""
    if not _CRATE_NAME.fullmatch(name):
        raise BurnsideError(f"{name!r} is not a crate name: a letter, then letters, digits, '-' or '_' "
                            "(it names the folder, the crate and its binary)")
    dest = parent / name
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BurnsideError(f"{dest}: already exists; give a new name, or remove it first")
    lock = rust_workspace() / "Cargo.lock"
    crate = trace_crate()
    if not (crate / "Cargo.toml").is_file() or not lock.is_file():
        raise BurnsideError(f"{crate}: burnside-trace's sources or the Cargo.lock are missing from this "
                            "burnside installation; reinstall burnside")
    templates = resources.files("burnside") / "templates" / KINDS[kind]
    parent.mkdir(parents=True, exist_ok=True)
    staging = None
    try:
        with stops_deferred():  # a stop just after mkdtemp must find the folder in `staging` to remove it
            staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
        for template, target in _FILES.items():
            text = (templates / template).read_text(encoding="utf-8")
            text = text.replace("{crate}", name).replace("{trace_crate}", _toml_string(crate.resolve()))
            text = text.replace("{target_dir}", str(_target()))
            out = staging / target
            out.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(out, text)
        write_atomic(staging / "Cargo.lock", lock.read_bytes())
        (staging / ".cargo").mkdir()
        write_atomic(staging / ".cargo" / "config.toml", cargo_config())
        os.chmod(staging, 0o755)  # mkdtemp makes it private to its owner
        if dest.exists():
            dest.rmdir()  # the empty folder checked above
        staging.rename(dest)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest

"""What the tests of ports in their own crates share: a crate of tests/burn/ copied out of the checkout as
`burnside new` makes one (on the installed burnside-trace and burnside's Cargo.lock); for the user ports of
tests/burn/user_ports/, its PyTorch side recorded, `burnside check` run in it, and the verdict and diagnoses
read from its output; and the small MLP the accumulation and optimizer-settings ports train."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from burnside.burn.locate import rust_workspace, trace_crate

BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]
PORTS = Path(__file__).resolve().parent / "user_ports"
#: Crates written as public third-party burn crates are: a library that knows nothing of burnside, and a binary
#: (the port) that loads it with the library's own loader and records it.
THIRD_PARTY = Path(__file__).resolve().parent / "third_party"


def copy_crate(source: Path, destination: Path) -> Path:
    """The crate at ``source`` copied to ``destination`` (not its target or lock), its relative path to the
    checkout's burnside-trace made the installed one's, with burnside's Cargo.lock."""
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns(
        "target", "Cargo.lock", "traces", "checkpoint", "burnside-out", "__pycache__"))
    manifest = destination / "Cargo.toml"
    text, count = re.subn(r'burnside-trace = \{ path = "(\.\./)+rust/burnside-trace" \}',
                          f'burnside-trace = {{ path = "{trace_crate().resolve()}" }}', manifest.read_text())
    assert count == 1, f"{manifest}: no relative path to the checkout's burnside-trace"
    manifest.write_text(text)
    shutil.copyfile(rust_workspace() / "Cargo.lock", destination / "Cargo.lock")
    return destination


def project(name: str, parent: Path, root: Path = PORTS, record_args: tuple[str, ...] = ()) -> Path:
    """``<root>/<name>`` (``user_ports/<name>`` unless told) copied into ``parent`` (check writes into it), recorded
    by its own record.py (given ``record_args``)."""
    port = copy_crate(root / name, parent / name)
    recorded = subprocess.run([sys.executable, "record.py", *record_args], cwd=port, capture_output=True, text=True,
                              timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    return port


def check(port: Path, *port_args: str, bin_name: str | None = None,
          options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`burnside check` of the project's `user_<name>` binary (or ``bin_name``) against its recorded traces and
    reference; ``options`` are check's own (``--features bug-bn-eps``), ``port_args`` go to the port after `--`."""
    args = ["check", "--burn-crate", ".", "--bin", bin_name or f"user_{port.name}", "--torch-trace",
            "traces/torch.safetensors", "--reference", "traces/reference.safetensors", *options]
    if port_args:
        args += ["--", *port_args]
    return subprocess.run([*BURNSIDE, *args], cwd=port, capture_output=True, text=True, timeout=900)


def verdict(proc: subprocess.CompletedProcess) -> str:
    """The verdict line (`worst=... OK` or `FAIL`); exactly one."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("worst=")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return lines[0]


def diagnoses(proc: subprocess.CompletedProcess) -> list[str]:
    """The diagnosis lines, in the order printed (causes first)."""
    return [line for line in proc.stdout.splitlines() if line.startswith("D0")]


def assert_named(proc: subprocess.CompletedProcess, rule: str, words: list[str]) -> None:
    """A slip's check: exit 1, a FAIL verdict, ``rule`` the first diagnosis, each of ``words`` in the output."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert verdict(proc).endswith(" FAIL"), proc.stdout
    found = diagnoses(proc)
    assert found and found[0].startswith(f"{rule} "), found
    for word in words:
        assert word in proc.stdout, (word, found)


class Checks:
    """One `burnside check` per port variant (``bug``, or None for the faithful port), shared by the cases that
    read it; ``fixed`` are the port arguments every run takes (an inference port's `--checkpoint PATH`). A bug is
    the port's `--bug NAME`, or with ``features=True`` the crate's cargo feature NAME (`check --features NAME`);
    ``bin_name`` is the binary when it is not `user_<name>`."""

    def __init__(self, *fixed: str, features: bool = False, bin_name: str | None = None) -> None:
        self.fixed = fixed
        self.features = features
        self.bin_name = bin_name
        self._runs: dict[str | None, subprocess.CompletedProcess] = {}

    def __call__(self, port: Path, bug: str | None) -> subprocess.CompletedProcess:
        if bug not in self._runs:
            if self.features:
                self._runs[bug] = check(port, *self.fixed, bin_name=self.bin_name,
                                        options=("--features", bug) if bug else ())
            else:
                self._runs[bug] = check(port, *self.fixed, *(["--bug", bug] if bug else []), bin_name=self.bin_name)
        return self._runs[bug]


class Mlp(nn.Module):
    """The model of the accumulation and optimizer-settings ports (accum_port, optim_port: src/main.rs): fc1
    4 -> 8, ReLU, fc2 8 -> 3."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))

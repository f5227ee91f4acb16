"""What the user-port tests share: a project of tests/burn/user_ports/ copied out of the checkout as
`burnside new` makes one (the installed burnside-trace, burnside's Cargo.lock) with its PyTorch side
recorded, `burnside check` run in it, and the verdict and diagnoses read from its output."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from burnside.burn.locate import rust_workspace, trace_crate

BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]
PORTS = Path(__file__).resolve().parent / "user_ports"


def project(name: str, parent: Path) -> Path:
    """``user_ports/<name>`` copied into ``parent`` (check writes into it), recorded by its own record.py."""
    port = parent / name
    shutil.copytree(PORTS / name, port,
                    ignore=shutil.ignore_patterns("traces", "checkpoint", "burnside-out", "__pycache__"))
    manifest = port / "Cargo.toml"
    relative = 'burnside-trace = { path = "../../../../rust/burnside-trace" }'
    assert relative in manifest.read_text()
    manifest.write_text(manifest.read_text().replace(
        relative, f'burnside-trace = {{ path = "{trace_crate().resolve()}" }}'))
    shutil.copyfile(rust_workspace() / "Cargo.lock", port / "Cargo.lock")
    recorded = subprocess.run([sys.executable, "record.py"], cwd=port, capture_output=True, text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    return port


def check(port: Path, *port_args: str, bin_name: str | None = None) -> subprocess.CompletedProcess:
    """`burnside check` of the project's `user_<name>` binary against its recorded traces and reference."""
    args = ["check", "--burn-crate", ".", "--bin", bin_name or f"user_{port.name}", "--torch-trace",
            "traces/torch.safetensors", "--reference", "traces/reference.safetensors"]
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

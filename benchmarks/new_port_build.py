"""Benchmark a new port's first build: `burnside new` on a machine where `burnside run a1` has run.

Two cases, each in a fresh temporary folder, against the shared target directory burnside builds
in (`CARGO_TARGET_DIR`, else ~/.cache/burnside/cargo-target), which must hold the burn build
`burnside run a1` made:

- *first port after an install*: the Cargo workspace copied to a new place (as a new wheel install
  puts it), so burnside-trace itself compiles at its new path, then the port;
- *next port*: another `burnside new` on the same install: only the port compiles.

For each it prints the wall time of the first `cargo build --release` of the port (what `burnside
check` runs first), how many units cargo compiled and which, and the load average. It fails
(exit 1) if burn itself was compiled again: then the target directory did not hold burnside's
build, or the port's features or lock file do not match it.

    python benchmarks/new_port_build.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from burnside.burn.locate import find_cargo, rust_workspace, target_dir
from burnside.burn.scaffold import new_port


def first_build(port: Path) -> tuple[float, list[str], int]:
    """Wall seconds of the port's first release build, the units compiled, the units in all."""
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir())}
    start = time.perf_counter()
    proc = subprocess.run([find_cargo(), "build", "--release", "--message-format=json"], cwd=port, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"the port did not build:\n{proc.stderr[-3000:]}")
    artifacts = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    artifacts = [a for a in artifacts if a.get("reason") == "compiler-artifact"]
    return wall, [a["target"]["name"] for a in artifacts if not a["fresh"]], len(artifacts)


def main() -> None:
    if not (target_dir() / "release").is_dir():
        sys.exit(f"{target_dir()}: no release build here; run `burnside run a1` first")
    rows = []
    with tempfile.TemporaryDirectory(prefix="burnside-new-port-") as tmp:
        tmp = Path(tmp)
        installed = tmp / "install" / "_rust"
        shutil.copytree(rust_workspace(), installed, ignore=shutil.ignore_patterns("target"))
        os.environ["BURNSIDE_RUST_DIR"] = str(installed)  # what a new install's rust_workspace() is
        for case, name in (("first port after an install", "firstport"), ("next port", "nextport")):
            port = new_port(name, tmp / "ports")
            load = os.getloadavg()[0]
            wall, compiled, units = first_build(port)
            rows.append((case, wall, compiled, units, load))
    print(f"{'case':<28} {'first build':>11}  {'compiled':<40} load")
    for case, wall, compiled, units, load in rows:
        print(f"{case:<28} {wall:>9.1f} s  {len(compiled):>2} of {units} units: {', '.join(compiled):<28} {load:.1f}")
    rebuilt = [c for _, _, compiled, _, _ in rows for c in compiled if c.startswith("burn") and c != "burnside_trace"]
    if rebuilt:
        sys.exit(f"burn was compiled again ({', '.join(rebuilt)}): the port's build does not reuse burnside's")


if __name__ == "__main__":
    main()

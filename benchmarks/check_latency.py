"""Benchmark the user's inner loop: `burnside check` of a `burnside new` port, once built, and `compare` alone.

On a machine where `burnside run a1` has run (the shared target directory holds burn's build), in a
temporary folder outside any checkout, it makes a port with `burnside new`, records its PyTorch side
(`python record.py`) and prints the wall time of:

- *first check after an install*: `burnside check` with burnside's Cargo workspace copied to a new
  place, as a new install puts it (burnside-trace and the port compiled; burn reused), and no Python
  bytecode cached yet;
- *warm check*: the same check again, nothing changed (the port's pinned build is run, no cargo build);
- *check after a one-line change*: a comment added to the port's src/main.rs, then the check (cargo
  rebuilds the port alone);
- *compare alone*: `burnside compare` of the same two traces and the reference;
- the floor: `python -c pass`, and `burnside --version` (the console script's start);
- *plain cargo build of a new port*: `cargo build --release` in another fresh `burnside new` project,
  without CARGO_TARGET_DIR (its `.cargo/config.toml` sends cargo to burnside's target directory, where
  burn is built; it fails if cargo built into the project's ./target).

Each command runs as the console script does (`from burnside.cli import main`), in a new process, and
reports whether it imported torch (none of these may: they record no PyTorch side). Python's bytecode
goes to a private cache (PYTHONPYCACHEPREFIX) so the figures are those of an installed package, whose
modules pip compiled, whatever PYTHONDONTWRITEBYTECODE says here; the first check starts that cache
empty. The machine's load average is printed: on a shared 2-core machine it moves every figure.

    python benchmarks/check_latency.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from burnside.burn.locate import find_cargo, rust_workspace, target_dir

#: The console script's entry, plus a note on stderr at exit if torch was imported.
RUNNER = ("import atexit, sys\n"
          "atexit.register(lambda: 'torch' in sys.modules and sys.stderr.write('burnside-bench: torch imported\\n'))\n"
          "from burnside.cli import main\n"
          "main()\n")
NAME = "latport"


def timed(command: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, bool]:
    """Wall seconds of ``command`` and whether it imported torch; exits if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(command[3:] if command[1] == '-c' else command)} failed ({proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return wall, "burnside-bench: torch imported" in proc.stderr


def burnside(*args: str) -> list[str]:
    return [sys.executable, "-c", RUNNER, *args]


def row(label: str, times: list[float], torch: bool) -> str:
    spread = f" (runs: {', '.join(f'{t:.2f}' for t in times)})" if len(times) > 1 else ""
    figure = statistics.median(times)
    return f"{label:<44} {figure:>6.2f} s{'  median' if len(times) > 1 else '        '}{spread}" + \
        ("  TORCH IMPORTED" if torch else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each warm case; the median is shown")
    args = parser.parse_args()
    if not (target_dir() / "release").is_dir():
        sys.exit(f"{target_dir()}: no release build here; run `burnside run a1` first")
    rows: list[str] = []
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="burnside-check-latency-") as tmp:
        tmp = Path(tmp)
        installed = tmp / "install" / "_rust"
        shutil.copytree(rust_workspace(), installed, ignore=shutil.ignore_patterns("target"))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"BURNSIDE_RUST_DIR": str(installed), "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
        timed(burnside("new", NAME, "--dir", str(tmp)), tmp, env)
        port = tmp / NAME
        timed([sys.executable, "record.py"], port, env)
        shutil.rmtree(tmp / "pycache")  # record.py compiled burnside's modules: the first check starts with none
        check = burnside("check", "--burn-crate", ".", "--bin", NAME, "--torch-trace", "traces/torch.safetensors",
                         "--reference", "traces/reference.safetensors")
        wall, torch = timed(check, port, env)
        rows.append(row("first check after an install", [wall], torch))
        warm = [timed(check, port, env) for _ in range(args.repeat)]
        rows.append(row("warm check", [w for w, _ in warm], any(t for _, t in warm)))
        main_rs = port / "src" / "main.rs"
        changed = []
        for k in range(max(1, args.repeat // 2)):
            main_rs.write_text(main_rs.read_text() + f"// edit {k}\n")
            changed.append(timed(check, port, env))
        rows.append(row("check after a one-line change to src/main.rs", [w for w, _ in changed],
                        any(t for _, t in changed)))
        compare = burnside("compare", "traces/torch.safetensors", f"burnside-out/check/{NAME}.burn.safetensors",
                           "--reference", "traces/reference.safetensors")
        alone = [timed(compare, port, env) for _ in range(args.repeat)]
        rows.append(row("compare alone (same traces)", [w for w, _ in alone], any(t for _, t in alone)))
        start = [timed([sys.executable, "-c", "pass"], port, env)[0] for _ in range(args.repeat)]
        rows.append(row("floor: python -c pass", start, False))
        version = [timed(burnside("--version"), port, env) for _ in range(args.repeat)]
        rows.append(row("floor: burnside --version", [w for w, _ in version], any(t for _, t in version)))
        timed(burnside("new", "plainport", "--dir", str(tmp)), tmp, env)
        plain = tmp / "plainport"
        cargo_env = {k: v for k, v in env.items() if k != "CARGO_TARGET_DIR"}
        wall, _ = timed([find_cargo(), "build", "--release"], plain, cargo_env)
        if (plain / "target").exists():
            sys.exit("cargo built the new port into its own ./target, not burnside's target directory")
        rows.append(row("plain `cargo build --release` of a new port", [wall], False))
    loads.append(os.getloadavg()[0])
    print(f"burnside check of a `burnside new` port ({NAME}, 3 Adam steps), target directory {target_dir()}")
    print("\n".join(rows))
    print(f"load average (1 min) {loads[0]:.1f} at start, {loads[1]:.1f} at the end; "
          f"{os.cpu_count()} cores")


if __name__ == "__main__":
    main()

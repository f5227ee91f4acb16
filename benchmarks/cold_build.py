"""Benchmark a new user's first verdict: the cold build of burnside's Rust workspace and the first run.

For the fully optimised profile (`--profile release-o3`, opt-level 3 everywhere, what the
workspace used before) and burnside's profile (`--release`), one after the other, the script
builds `cargo build --workspace` in a fresh temporary target directory (nothing reused but
cargo's download cache), then runs `train-step -o T --steps 100 --optim adam` (A1, 100 Adam
steps, a trace of every step) once as the first run and a few more times for the best time.
It prints both side by side with the machine's load average, which matters: cold builds
are CPU-bound and slow down in proportion to anything else running. CPU time (user+sys of
cargo and rustc) is printed too; it moves less with the load than wall time. The temporary
directories are deleted at the end, also on Ctrl-C.

    python benchmarks/cold_build.py [--dir PARENT] [--steps 100] [--repeat 5] [--profile release-o3 --profile release]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

RUST_DIR = Path(__file__).resolve().parents[1] / "rust"

#: The profiles compared, by name: what cargo is given for each.
PROFILES = {
    "release-o3": ["--profile", "release-o3"],
    "release": ["--release"],
}
LABELS = {"release-o3": "opt-level 3 (release-o3)", "release": "burnside's --release"}

#: How often a progress line is printed while cargo runs.
PROGRESS_EVERY = 20.0


@dataclass
class Measurement:
    """One profile's cold build and runs."""

    profile: str
    build_wall: float
    build_cpu: float
    units: int
    load_before: float
    load_after: float
    first_run: float
    best_run: float
    best_cpu: float


def _load() -> float:
    return os.getloadavg()[0]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cold_build(profile: str, target: Path) -> tuple[float, float, int, Path]:
    """Build the workspace into the empty ``target``; (wall s, CPU s, units built, train-step path)."""
    command = ["cargo", "build", *PROFILES[profile], "--workspace", "--message-format=json"]
    env = {**os.environ, "CARGO_TARGET_DIR": str(target)}
    built: list[str] = []  # unit names, appended by the reader thread
    executables: dict[str, Path] = {}

    def read(stream) -> None:
        for line in stream:
            msg = json.loads(line) if line.startswith("{") else {}
            if msg.get("reason") == "compiler-artifact":
                if msg.get("executable"):
                    executables[msg["target"]["name"]] = Path(msg["executable"])
                built.append(msg["target"]["name"])

    cpu_before, start = _children_cpu(), time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen(command, cwd=RUST_DIR, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        reader = threading.Thread(target=read, args=(proc.stdout,), daemon=True)
        reader.start()
        try:
            while True:  # a line every PROGRESS_EVERY seconds, also while one large crate compiles
                try:
                    returncode = proc.wait(timeout=PROGRESS_EVERY)
                    break
                except subprocess.TimeoutExpired:
                    last = f" (last: {built[-1]})" if built else ""
                    print(f"  [{profile}] {time.perf_counter() - start:5.0f} s  {len(built)} units built{last}"
                          f"  load {_load():.2f}", flush=True)
        except BaseException:  # Ctrl-C: stop cargo before its directory is deleted
            proc.kill()
            proc.wait()
            raise
        reader.join()
        wall, cpu = time.perf_counter() - start, _children_cpu() - cpu_before
        if returncode != 0 or "train-step" not in executables:
            stderr.seek(0)
            tail = "\n".join(stderr.read().splitlines()[-20:])
            sys.exit(f"cargo build {' '.join(PROFILES[profile])} failed (exit {returncode}):\n{tail}")
    return wall, cpu, len(built), executables["train-step"]


def timed_run(executable: Path, args: list[str]) -> tuple[float, float]:
    """Run once; (wall s, CPU s of the process alone)."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(executable), *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{executable.name} {' '.join(args)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def measure(profile: str, parent: Path | None, steps: int, repeat: int) -> Measurement:
    """Cold-build ``profile`` in a fresh directory under ``parent``, run train-step; delete the directory."""
    target = Path(tempfile.mkdtemp(prefix=f"burnside-cold-{profile}-", dir=parent))
    try:
        load_before = _load()
        print(f"[{profile}] cold build into {target} (load {load_before:.2f}) ...", flush=True)
        wall, cpu, units, train_step = cold_build(profile, target)
        load_after = _load()
        print(f"[{profile}] built {units} units in {wall:.1f} s (CPU {cpu:.1f} s), load {load_after:.2f}", flush=True)
        args = ["-o", str(target / "trace.safetensors"), "--steps", str(steps), "--optim", "adam"]
        runs = [timed_run(train_step, args) for _ in range(repeat)]
        first, best, best_cpu = runs[0][0], min(w for w, _ in runs), min(c for _, c in runs)
        print(f"[{profile}] train-step {steps} Adam steps: first run {first:.3f} s, best of {repeat} {best:.3f} s "
              f"(CPU {best_cpu:.3f} s)", flush=True)
        return Measurement(profile, wall, cpu, units, load_before, load_after, first, best, best_cpu)
    finally:
        shutil.rmtree(target, ignore_errors=True)


def table(results: list[Measurement], steps: int, repeat: int) -> str:
    rows = [
        ("cold build, wall", [f"{m.build_wall:.1f} s" for m in results]),
        ("cold build, CPU (user+sys)", [f"{m.build_cpu:.1f} s" for m in results]),
        ("units built", [str(m.units) for m in results]),
        ("load average (1 min) before / after", [f"{m.load_before:.2f} / {m.load_after:.2f}" for m in results]),
        (f"train-step {steps} Adam steps, first run", [f"{m.first_run:.3f} s" for m in results]),
        (f"train-step {steps} Adam steps, best of {repeat}", [f"{m.best_run:.3f} s" for m in results]),
        (f"train-step {steps} Adam steps, CPU, best of {repeat}", [f"{m.best_cpu:.3f} s" for m in results]),
    ]
    heads = [LABELS[m.profile] for m in results]
    width = max(len(r[0]) for r in rows)
    cols = [max(len(h), *(len(r[1][i]) for r in rows)) for i, h in enumerate(heads)]
    lines = [" " * width + "".join(f"  {h:>{c}}" for h, c in zip(heads, cols))]
    lines += [f"{name:<{width}}" + "".join(f"  {v:>{c}}" for v, c in zip(values, cols)) for name, values in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="parent of the temporary target directories (default: the system's)")
    parser.add_argument("--steps", type=int, default=100, help="Adam steps of the timed train-step run")
    parser.add_argument("--repeat", type=int, default=5, help="runs of train-step per profile (the first is reported apart)")
    parser.add_argument("--profile", action="append", choices=list(PROFILES),
                        help="profile to measure, repeatable (default: release-o3 then release)")
    options = parser.parse_args()
    if shutil.which("cargo") is None:
        print("cargo not found: install Rust with rustup (https://rustup.rs) and re-run", file=sys.stderr)
        sys.exit(2)
    if options.dir is not None and not options.dir.is_dir():
        print(f"--dir {options.dir}: not a directory; give an existing directory for the temporary builds",
              file=sys.stderr)
        sys.exit(2)
    if options.steps < 1 or options.repeat < 1:
        print("--steps and --repeat must be at least 1", file=sys.stderr)
        sys.exit(2)
    print(f"{os.cpu_count()} CPUs, {subprocess.run(['rustc', '--version'], capture_output=True, text=True).stdout.strip()}"
          f", workspace {RUST_DIR}", flush=True)
    results = [measure(profile, options.dir, options.steps, options.repeat)
               for profile in options.profile or list(PROFILES)]
    print()
    print(table(results, options.steps, options.repeat))


if __name__ == "__main__":
    main()

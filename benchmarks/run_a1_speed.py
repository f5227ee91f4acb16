"""Benchmark `burnside run a1 --steps N --optim adam` once built: the whole command's wall time (PyTorch
side, burn side, the float64 reference and its burn-adam variant, the comparison and the plot), median
of a few runs, with the machine's load printed next to it since a busy 2-core machine moves the figure.

    python benchmarks/run_a1_speed.py [--steps 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the median is shown")
    args = parser.parse_args()
    command = [*BURNSIDE, "run", "a1", "--steps", str(args.steps), "--optim", "adam"]
    with tempfile.TemporaryDirectory(prefix="burnside-run-bench-") as tmp:
        warm = subprocess.run(command, cwd=tmp, capture_output=True, text=True, check=False)  # builds, if needed
        if warm.returncode not in (0, 1):
            sys.exit(f"burnside run failed: {warm.stderr.strip()}")
        times = []
        for _ in range(args.repeat):
            start = time.monotonic()
            subprocess.run(command, cwd=tmp, capture_output=True, check=False)
            times.append(time.monotonic() - start)
    load = os.getloadavg()[0]
    print(f"burnside run a1 --steps {args.steps} --optim adam, built: median {statistics.median(times):.1f} s "
          f"(runs: {', '.join(f'{t:.1f}' for t in times)}; load average {load:.1f})")


if __name__ == "__main__":
    main()

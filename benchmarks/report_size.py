"""Benchmark `burnside report` on compare_speed's two ~1 GiB f32 traces (16 tensors): wall time
against `burnside compare` on the same files in the same run, peak private memory, and the page's size.

The report compares (the same pass as compare), draws its plots and reads the worst tensor once more
for the histogram; the page holds summaries and plots, never the data.

    python benchmarks/report_size.py [--size-mib 1024] [--tensors 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from compare_speed import build_traces, measure

BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--tensors", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="runs per contender; the median is shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="burnside-report-bench-") as tmp:
        directory = Path(tmp)
        a, b = build_traces(directory, args.size_mib, args.tensors)
        for path in (a, b):  # warm the page cache, as compare_speed does
            with open(path, "rb") as handle:
                while handle.read(1 << 24):
                    pass
        page = directory / "report.html"
        contenders = {"burnside compare": [*BURNSIDE, "compare", str(a), str(b)],
                      "burnside report": [*BURNSIDE, "report", str(a), str(b), "-o", str(page)]}
        traces_mib = (a.stat().st_size + b.stat().st_size) / 2**20
        print(f"two traces, {traces_mib:.0f} MiB together, {args.tensors} tensors; median of {args.repeat}")
        for label, argv in contenders.items():
            runs = [measure(argv) for _ in range(args.repeat)]
            codes = {code for _, code, _, _ in runs}
            if codes - {0, 1}:
                sys.exit(f"{label} failed with exit code {sorted(codes)}")
            wall = statistics.median(w for w, _, _, _ in runs)
            anon = max(p for _, _, _, p in runs)
            print(f"{label:<18} {wall:6.2f} s   peak private {anon / 2**20:6.0f} MiB")
        print(f"report page: {page.stat().st_size / 1024:.0f} KiB ({page.stat().st_size / 2**20 / traces_mib:.1e} "
              "of the traces' size)")


if __name__ == "__main__":
    main()

"""Fuzz every file burnside reads, for as long as you like: traces (safetensors, JSON), init files, tolerance files.

Each mutant goes through open_trace -> compare_traces (both ways against its seed) -> diagnose ->
convert and back (or load_tolerances -> compare, for tolerance files), with a per-case timeout.
Prints, per form, the mutants run and how many were accepted, rejected, crashed, hung or got a
verdict the exact reference disagrees with; then every distinct crash site, hang and wrong verdict,
with the mutant kept in --keep for a regression test.

    python benchmarks/fuzz_traces.py [--mutants 10000] [--seed 1] [--timeout 10] [--forms json,safetensors]
                                     [--keep DIR] [--no-torch]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile.trace_fuzzer import FORMS, fuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=10_000, help="mutants per form")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--forms", default=",".join(FORMS), help=f"comma-separated, from {', '.join(FORMS)}")
    parser.add_argument("--keep", type=Path, default=Path("fuzz-findings"), help="where crashing mutants are kept")
    parser.add_argument("--no-torch", action="store_true", help="skip the seed trace recorded with PyTorch")
    args = parser.parse_args()
    forms = tuple(f for f in args.forms.split(",") if f)
    unknown = set(forms) - set(FORMS)
    if unknown:
        parser.error(f"unknown form(s) {', '.join(sorted(unknown))}")
    start = time.perf_counter()
    report = fuzz(args.mutants, seed=args.seed, forms=forms, timeout=args.timeout, crash_dir=args.keep,
                  with_torch=not args.no_torch,
                  progress=lambda form, done: print(f"  {form}: {done} mutants", file=sys.stderr, flush=True))
    print("\n".join(report.lines()))
    print(f"seed {args.seed}, {time.perf_counter() - start:.0f} s")
    bad = sum(c.crashes + c.hangs + c.wrong for c in report.counts.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

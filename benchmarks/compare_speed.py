"""Benchmark `burnside compare` on two ~1 GiB f32 traces (16 tensors), against
`torch.testing.assert_close` and a plain numpy pass over memory-mapped chunks.

Each contender runs in its own process; the script prints wall time, GB/s (both
traces' bytes over wall time), peak RSS, and peak anonymous (private) memory,
sampled from /proc every 5 ms. The page cache is warm for every contender (the
files are read once first), so the figures compare computation, not the disk.

    python benchmarks/compare_speed.py [--size-mib 1024] [--tensors 16] [--dir DIR] [--keep] [--reference]

With --reference, a float64 reference trace (A's values in f64, twice A's size) is written too
and `burnside compare --reference` joins the contenders.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np


def build_traces(directory: Path, size_mib: int, count: int, dense: bool = False) -> tuple[Path, Path]:
    """Two traces; four of `count` tensors differ: every element by 1 ulp, a sparse few,
    one element far out of tolerance, one NaN on one side. With `dense`, every element of
    every tensor differs by 1 ulp (the worst case: nothing can be skipped)."""
    from burnside.trace import write_trace

    n = size_mib * 1024 * 1024 // 4 // count
    rng = np.random.default_rng(0)
    a_tensors, b_tensors = {}, {}
    params = [f"layers.{i}.weight" for i in range(count - 1)]
    names = ["step0.logits"] + [f"step0.params_after.{p}" for p in params]
    for i, name in enumerate(names):
        a = rng.standard_normal(n, dtype=np.float32)
        b = a.copy()
        if dense or i == 1:
            b = np.nextafter(a, np.float32(np.inf))  # every element 1 ulp up
        elif i == 2:
            idx = rng.choice(n, 1000, replace=False)
            b[idx] = np.nextafter(a[idx], np.float32(-np.inf))
        elif i == 3:
            b[n // 2] += np.float32(0.5)
        elif i == 4:
            b[7] = np.nan
        a_tensors[name], b_tensors[name] = a, b
    meta = {"framework": "pytorch", "framework_version": "bench", "device": "cpu", "dtype": "float32",
            "steps": 1, "optimizer": {"name": "sgd", "lr": 0.1}, "params": params, "grads_len": [count - 1]}
    a_path = write_trace(directory / "a.safetensors", a_tensors, meta)
    del a_tensors
    b_path = write_trace(directory / "b.safetensors", b_tensors, meta | {"framework": "burn"})
    return a_path, b_path


def build_reference(directory: Path, a_path: Path) -> Path:
    """A float64 reference of A's tensors: A's values widened, as a reference recorder writes them."""
    from burnside.trace import open_trace, write_trace

    a = open_trace(a_path)
    tensors = {name: np.asarray(a.array(name), dtype=np.float64) for name in a.names}
    return write_trace(directory / "reference.safetensors", tensors, a.metadata | {"reference": "float64"})


def measure(argv: list[str]) -> tuple[float, int, int, int]:
    """Run a command; return (wall seconds, exit code, peak RSS bytes, peak anonymous bytes)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak_rss = peak_anon = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            peak_rss = max(peak_rss, int(fields.get("VmHWM", "0 kB").split()[0]) * 1024)
            peak_anon = max(peak_anon, int(fields.get("RssAnon", "0 kB").split()[0]) * 1024)
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0, 1):
        print(stderr, file=sys.stderr)
    return wall, proc.returncode, peak_rss, peak_anon


NUMPY_PASS = textwrap.dedent("""
    import sys, numpy as np
    from burnside.trace import open_trace
    a, b = open_trace(sys.argv[1]), open_trace(sys.argv[2])
    worst = 0.0
    for name in a.names:
        x, y = a.array(name).reshape(-1), b.array(name).reshape(-1)
        for s in range(0, x.size, 1 << 20):
            worst = max(worst, float(np.nanmax(np.abs(x[s:s + (1 << 20)] - y[s:s + (1 << 20)]))))
    print(worst)
""")

NUMPY_PASS_THREE = textwrap.dedent("""
    import sys, numpy as np
    from burnside.trace import open_trace
    a, b, r = open_trace(sys.argv[1]), open_trace(sys.argv[2]), open_trace(sys.argv[3])
    worst = [0.0, 0.0, 0.0]
    for name in a.names:
        x, y, z = a.array(name).reshape(-1), b.array(name).reshape(-1), r.array(name).reshape(-1)
        for s in range(0, x.size, 1 << 20):
            xs, ys, zs = x[s:s + (1 << 20)], y[s:s + (1 << 20)], z[s:s + (1 << 20)]
            worst[0] = max(worst[0], float(np.nanmax(np.abs(xs - ys))))
            worst[1] = max(worst[1], float(np.nanmax(np.abs(xs - zs))))
            worst[2] = max(worst[2], float(np.nanmax(np.abs(ys - zs))))
    print(worst)
""")

TORCH_ASSERT_CLOSE = textwrap.dedent("""
    import sys, torch
    from safetensors.torch import load_file
    a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
    failed = 0
    for name in a:
        try:
            torch.testing.assert_close(a[name], b[name], atol=1e-6, rtol=0)
        except AssertionError:
            failed += 1
    sys.exit(1 if failed else 0)
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--tensors", type=int, default=16)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the traces (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the traces")
    parser.add_argument("--skip-torch", action="store_true", help="skip torch.testing.assert_close")
    parser.add_argument("--repeat", type=int, default=3, help="runs per contender; the median is shown")
    parser.add_argument("--dense", action="store_true", help="every element of every tensor differs (worst case)")
    parser.add_argument("--reference", action="store_true", help="also time compare with a float64 reference")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="burnside-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        a, b = build_traces(directory, args.size_mib, args.tensors, args.dense)
        total = a.stat().st_size + b.stat().st_size
        print(f"traces: 2 x {a.stat().st_size / 2**30:.2f} GiB, {args.tensors} tensors each"
              f"{' (every element differs)' if args.dense else ''}, "
              f"built in {time.perf_counter() - t0:.1f} s; {os.cpu_count()} cores")
        reference = build_reference(directory, a) if args.reference else None
        for path in (a, b) + ((reference,) if reference else ()):  # warm the page cache for every contender alike
            with path.open("rb") as handle:
                while handle.read(1 << 24):
                    pass
        burnside = [sys.executable, "-c", "from burnside.cli import main; main()", "compare", str(a), str(b), "--json"]
        contenders = [("burnside compare", burnside),
                      *([("compare --reference", burnside + ["--reference", str(reference)])] if reference else []),
                      ("numpy pass (mmap chunks)", [sys.executable, "-c", NUMPY_PASS, str(a), str(b)]),
                      *([("numpy pass, three files", [sys.executable, "-c", NUMPY_PASS_THREE, str(a), str(b),
                                                       str(reference)])] if reference else [])]
        if not args.skip_torch:
            contenders.append(("torch assert_close", [sys.executable, "-c", TORCH_ASSERT_CLOSE, str(a), str(b)]))
        print(f"median of {args.repeat} runs each (min in parentheses)")
        print(f"{'contender':<26} {'wall s':>13} {'GB/s':>6} {'peak RSS MiB':>13} {'peak private MiB':>17} exit")
        walls: dict[str, float] = {}
        for label, argv in contenders:
            runs = sorted((measure(argv) for _ in range(args.repeat)), key=lambda r: r[0])
            wall, code, rss, anon = runs[len(runs) // 2]
            rss, anon = max(r[2] for r in runs), max(r[3] for r in runs)
            walls[label] = wall
            read = total + (reference.stat().st_size if reference and ("three" in label or "reference" in label)
                            else 0)
            print(f"{label:<26} {wall:6.2f} ({runs[0][0]:4.2f}) {read / wall / 1e9:6.2f} {rss / 2**20:13.0f} "
                  f"{anon / 2**20:17.0f} {code:>4}")
        print(f"burnside compare / numpy pass over the two files: "
              f"{walls['burnside compare'] / walls['numpy pass (mmap chunks)']:.2f}x (target <= 1x)")
        if reference:
            print(f"compare --reference / numpy pass over the three files: "
                  f"{walls['compare --reference'] / walls['numpy pass, three files']:.2f}x (target <= 2x)")
        print("targets for burnside compare: <= 256 MiB private memory")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

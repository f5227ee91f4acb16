"""Benchmark the recorders' memory and time on a 25.2 M-parameter MLP: the plain training loop,
`burnside.torch.record` (in full, and with `full_steps=[0, -1], layer_statistics=True`: the steps between and
every layer's input and output as statistics) and `burnside.reference.record_reference` (with its burn-adam
variant).

The model is six 2048x2048 Linears with GELU between them, batch 8, 3 Adam steps, activations on.
Each case runs in its own process, so its peak RSS (VmHWM, the process's high-water mark) is its
own; the script prints each case's wall time (the loop alone, without the import of torch), peak
RSS and the bytes it wrote, then the disk's sequential write speed measured in the same run (a
~1 GiB file written then fsynced in the output directory, as the recorders write; the disk's own speed,
with the page cache dropped behind the writes, is printed beside it) and the two targets:

- recorder peak RSS <= plain peak RSS + 512 MiB (the recorder streams: memory is the loop's own);
- recorder wall <= (plain wall + bytes written / disk speed) x 1.5.

The float64 reference is also measured against its own floor, the same loop in float64 (`plain64`),
run twice (the reference trains its copy twice: its trace and its burn-adam variant).

    python benchmarks/record_memory.py [--dir DIR] [--steps 3] [--disk-mib 1024] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_CASE = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import torch
    from torch import nn

    case, out, steps = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    torch.manual_seed(0)
    layers = []
    for i in range(6):
        layers += [nn.Linear(2048, 2048)] + ([nn.GELU()] if i < 5 else [])
    model = nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [{"x": torch.randn(8, 2048), "y": torch.randint(0, 2048, (8,))} for _ in range(steps)]
    start = time.perf_counter()
    if case == "plain64":  # the reference's own arithmetic: the same loop on a float64 copy
        model = model.double()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        batches = [{"x": b["x"].double(), "y": b["y"]} for b in batches]
    if case in ("plain", "plain64"):
        for batch in batches:
            loss = nn.functional.cross_entropy(model(batch["x"]), batch["y"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        written = 0
    elif case == "record":
        from burnside.torch import record
        record(model, opt, batches, out, steps=steps, activations=True)
        written = out.stat().st_size
    elif case == "record-stats":  # the first and last steps in full, the others and every layer as statistics
        from burnside.torch import record
        record(model, opt, batches, out, steps=steps, activations=True, full_steps=[0, -1], layer_statistics=True)
        written = out.stat().st_size
    else:
        from burnside.recording.reference import record_reference, reference_files
        files = reference_files(model, opt, out)  # the trace and its burn-adam variant
        record_reference(model, opt, batches, out, steps=steps)
        written = sum(f.stat().st_size for f in files)
    wall = time.perf_counter() - start
    hwm = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"wall": wall, "peak_rss": hwm, "written": written}))
""")


def run_case(case: str, directory: Path, steps: int) -> dict:
    out = directory / f"{case}.safetensors"
    proc = subprocess.run([sys.executable, "-c", _CASE, case, str(out), str(steps)], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"case {case} failed:\n{proc.stderr}")
    for leftover in directory.glob(f"{case}*.safetensors"):
        leftover.unlink()
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: The file `disk_speed` writes in the directory it measures.
DISK_SPEED_FILE = "disk-speed.bin"


def disk_speed(directory: Path, mib: int, drop_behind: bool = False, keep: bool = False) -> float:
    """Bytes per second of a sequential write of ``mib`` MiB in 1 MiB blocks, fsync included: as the trace
    writers write, into the page cache and synced at the end. With ``drop_behind`` (where the system has
    ``posix_fadvise``), every 64 MiB written is handed to writeback at once and the 64 MiB before it dropped
    from the page cache, so the same few hundred MiB of pages are used over and over: the disk's own speed.
    On a VM that hands freed memory back to its host (this project's machines), the two differ several
    times over, because every page the page cache takes anew costs a fault in the host. With ``keep`` the
    file (`DISK_SPEED_FILE` in ``directory``) is left for the caller to remove: while it stays, its pages
    stay in the page cache instead of going back to the system for the next writer to reuse."""
    block = os.urandom(1 << 20)
    path = directory / DISK_SPEED_FILE
    behind = drop_behind and hasattr(os, "posix_fadvise")
    chunk = 64
    start = time.perf_counter()
    with open(path, "wb", buffering=0) as handle:
        for i in range(1, mib + 1):
            handle.write(block)
            if behind and i % chunk == 0:
                os.posix_fadvise(handle.fileno(), max(0, i - 2 * chunk) << 20, (2 * chunk) << 20,
                                 os.POSIX_FADV_DONTNEED)
        os.fsync(handle.fileno())
    seconds = time.perf_counter() - start
    if not keep:
        path.unlink()
    return mib * (1 << 20) / seconds


def disk_speeds(directory: Path, mib: int) -> tuple[float, str]:
    """The sequential write speed the targets use (`disk_speed`: as the recorders write), and a line saying it
    beside the disk's own speed (``drop_behind``)."""
    cached, own = disk_speed(directory, mib), disk_speed(directory, mib, drop_behind=True)
    line = (f"disk sequential write (write + fsync, {mib} MiB, through the page cache as the recorders write): "
            f"{cached / 1e6:.0f} MB/s; the disk itself, the page cache dropped behind: {own / 1e6:.0f} MB/s")
    return cached, line


def gib(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the traces are written (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--disk-mib", type=int, default=1024)
    parser.add_argument("--keep", action="store_true", help="keep the directory")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="burnside-record-memory-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        speed, speed_line = disk_speeds(directory, args.disk_mib)
        results = {case: run_case(case, directory, args.steps)
                   for case in ("plain", "record", "record-stats", "reference", "plain64")}
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    plain = results["plain"]
    print(f"model: 6 x Linear(2048, 2048) + GELU, 25.2 M params; batch 8, {args.steps} Adam steps, activations on")
    print(speed_line)
    print(f"{'case':<12} {'wall':>8} {'peak RSS':>10} {'written':>10} {'RSS target':>11} {'wall target':>12}")
    ok = True
    for case, r in results.items():
        if case.startswith("plain"):
            continue
        if case == "record":
            print(f"{'plain':<12} {plain['wall']:>7.2f}s {gib(plain['peak_rss']):>10} {'-':>10}")
        rss_target = plain["peak_rss"] + (512 << 20)
        wall_target = (plain["wall"] + r["written"] / speed) * 1.5
        rss_ok, wall_ok = r["peak_rss"] <= rss_target, r["wall"] <= wall_target
        if case != "reference":  # the reference's own floor is the float64 loop (below)
            ok &= rss_ok and wall_ok
        print(f"{case:<12} {r['wall']:>7.2f}s {gib(r['peak_rss']):>10} {gib(r['written']):>10} "
              f"{gib(rss_target):>8} {'ok' if rss_ok else 'NO':>2} {wall_target:>8.2f}s {'ok' if wall_ok else 'NO':>2}")
    print("float32 recorders: targets met" if ok else "float32 recorders: targets missed")
    # The reference trains a float64 copy twice (its trace and its burn-adam variant): its own floor is the
    # float64 loop's memory and two runs of it, not the float32 loop's.
    p64, r = results["plain64"], results["reference"]
    rss64, wall64 = p64["peak_rss"] + (512 << 20), (2 * p64["wall"] + r["written"] / speed) * 1.5
    print(f"{'plain64':<10} {p64['wall']:>7.2f}s {gib(p64['peak_rss']):>10} {'-':>10}   (the same loop in float64)")
    print(f"reference against plain64: peak RSS {gib(r['peak_rss'])} <= {gib(rss64)} "
          f"{'ok' if r['peak_rss'] <= rss64 else 'NO'}; wall {r['wall']:.2f}s <= (2 x plain64 + bytes / speed) x 1.5 "
          f"= {wall64:.2f}s {'ok' if r['wall'] <= wall64 else 'NO'}")


if __name__ == "__main__":
    main()

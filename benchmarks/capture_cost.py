"""What tap-free recording costs against the eager forward, in time and peak memory.

burnside-trace's `Inference` records an inference port's forward pass without taps: on the Flex device
without autodiff it captures the forward with burn's graph capture, replays the graph op by op on Flex and
records every operation's output (`step{k}.captured.{n}`). The project's targets: tap-free recording within
2x of the eager forward (time), and its peak memory within the eager run's + 512 MiB.

Two ports, each run as its own process in four ways (the port's switches):

- `eager`: `--no-record`, the same forward passes, each output read to the host, nothing written;
- `taps only`: `--taps-only`, `Inference::with_taps_only()`: the eager forward, its taps recorded;
- `tap-free`: `--tap-free`, the forward called with `Tap::off()`: graph capture records every op's output;
- `taps+capture`: no switch, the port's default: tapped and captured.

The ports: (1) the classifier example (`rust/classifier`, `burnside run classifier`'s port; the PyTorch side
`burnside.examples.classifier`, its checkpoint loaded with burn-store), over `--classifier-batches` batches of
8 images 3x16x16: a forward pass costs about a millisecond, so it takes many batches to weigh anything; (2)
the GPT-2-small inference port of `benchmarks/gpt2_scale.py --inference` (`rust/gpt2-bench --inference`,
which taps every layer; 124 M parameters at the defaults), over `--gpt2-batches` batches of one sequence of
`--context` tokens. Both sides' inputs are made here as `burnside run` / `gpt2_scale.py` make them: the
PyTorch trace recorded, the init file made from it by `init_from_trace`.

Every case runs once as a warm-up (its figures dropped), then `--runs` times, the cases interleaved round by
round so that a change in the machine's load falls on all of them. For each run: the process's wall time;
`loop`, the forward passes alone: from the port's `step 0/N` to its `step N/N` progress line
(`burnside_trace::step_done` with `BURNSIDE_PROGRESS` set: after the model is loaded and, when recording,
its parameters written, until the last batch is recorded, before the trace's header is finished); the
child's CPU time (user + sys) and peak RSS (`wait4`'s `ru_maxrss`); the bytes written. The table gives each
case's median wall (and its parts before and after the loop), loop and CPU, its largest peak RSS, and the ratios to `eager`: the 2x target is the loop's
ratio (the forward passes; the process's ratio beside it includes loading the model and writing its
parameters once, which the eager run does not do). The machine's load: the CPU time other processes used
while the runs ran, from /proc/stat less this process and its children, as a share of the machine's cores.

    python benchmarks/capture_cost.py [--models classifier,gpt2] [--runs 3]
        [--classifier-batches 200] [--gpt2-batches 3]
        [--layers 12 --d-model 768 --vocab 50257 --context 64] [--profile release-o3] [--bins DIR]
        [--dir DIR] [--keep]

A quick run: `--layers 2 --d-model 128 --vocab 1000 --runs 2`.

Measured on this project's 2-core VM, quiet (other processes under 2% of the cores), 5 runs, release-o3:
GPT-2 small, tap-free's loop 1.52x to 2.29x of eager's over three whole runs of the script (1.58x in the
last), peak RSS +49 MiB; before the capture passed the parameters as stand-ins (capture.rs) it was 3.66x
and +972 MiB. What is left of the loop beyond the eager compute is writing the ops' outputs (185 MiB a
batch); the capture itself is milliseconds. `after` was 1.2 to 3.1 s (eager's 0.1 s) while the trace's header
outgrew the room `Inference::run` reserved for it (194 KiB reserved, 502 KiB needed: the writer copied the whole
1.1 GB file once more); batch 0 is now captured before the file starts and sizes the room, and `after` is
0.15 s (2 runs). That run's tap-free loop was 2.39x of eager's (2.78 to 2.82 s against 1.17 s, 1.04 GiB
written, peak RSS +135 MiB): the loop writes as fast as the disk takes it, and the ratio moves with the page
cache from run to run of the script. With the replay streaming each operation's output to the file as it makes
it (one tensor in memory, not a batch's 185 MiB; the header sized from batch 0's operation count): tap-free's
loop 1.78x of eager's (1.665 to 2.394 s against 1.140 s, 2 runs), peak RSS that of eager (1.56 GiB, +0 MiB),
`after` 0.15 s.
The classifier's forward is half a millisecond a batch: tap-free's loop is 2.7x to 3.0x of eager's, and the
taps alone, writing the same bytes, 1.6x to 2.1x; at the `release` profile `burnside run` builds (opt-level
0) the forward costs 25 ms a batch and tap-free is 1.12x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from gpt2_scale import build_model, gib, size  # the same model and init (this folder is on sys.path)

REPO = Path(__file__).resolve().parent.parent
RUST = REPO / "rust"
MIB = 1 << 20
#: The cases: (name, the port's switches).
CASES = (("eager", ["--no-record"]), ("taps only", ["--taps-only"]), ("tap-free", ["--tap-free"]),
         ("taps+capture", []))


def build(profile: str, directory: Path) -> Path:
    """Build both ports with cargo's ``profile`` in burnside's shared target directory and copy them to
    ``directory``: another build in the shared directory may replace the binaries while the runs go on."""
    from burnside.burn.cargo import target_dir

    target = target_dir()
    cmd = ["cargo", "build", "--profile", profile, "-p", "classifier", "-p", "gpt2-bench"]
    print(f"building: {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, cwd=RUST, env={**os.environ, "CARGO_TARGET_DIR": str(target)},
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    built = target / ("release" if profile == "release" else profile)
    bins = directory / "bin"
    bins.mkdir(exist_ok=True)
    for name in ("classifier", "gpt2-bench"):
        shutil.copy2(built / name, bins / name)
    return bins


def classifier_inputs(directory: Path, batches: int) -> tuple[Path, list[str]]:
    """The classifier's PyTorch trace and checkpoint, and the init file from the trace: the port's arguments."""
    from burnside.burn.port import init_from_trace
    from burnside.examples import classifier
    from burnside.trace import open_trace

    trace = classifier.record_torch(directory / "classifier.torch.safetensors", steps=batches)
    init = init_from_trace(open_trace(trace), directory / "classifier.init.safetensors")
    return init, ["--batches", str(batches), "--checkpoint", str(directory / classifier.CHECKPOINT)]


def gpt2_inputs(directory: Path, cfg: dict) -> tuple[Path, list[str], int]:
    """GPT-2's forward trace recorded by `record_forward` (the model and batches as gpt2_scale.py makes them),
    the init file from it: the port's arguments, and the model's parameter count."""
    import torch

    from burnside.burn.port import init_from_trace
    from burnside.torch import record_forward
    from burnside.trace import open_trace

    torch.manual_seed(0)
    model = build_model(cfg["layers"], cfg["d_model"], cfg["heads"], cfg["vocab"], cfg["context"])
    batches = []
    for _ in range(cfg["batches"]):
        seq = torch.randint(0, cfg["vocab"], (1, cfg["context"] + 1))
        batches.append({"x": seq[:, :-1].contiguous()})
    params = sum(p.numel() for p in model.parameters())
    trace = record_forward(model, batches, directory / "gpt2.torch.safetensors")
    del model
    init = init_from_trace(open_trace(trace), directory / "gpt2.init.safetensors")
    trace.unlink()  # only the init file is needed from here
    return init, ["--inference", "--batches", str(cfg["batches"]), "--heads", str(cfg["heads"])], params


#: Runs the port as its only child, so that the child's peak RSS is its own: a child forked from this process (the
#: driver, with torch loaded) would inherit the driver's high-water mark, which Linux carries across exec.
_WRAP = """
import json, os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
end = time.perf_counter()  # CLOCK_MONOTONIC: the driver's clock too
print(json.dumps({"start": start, "end": end, "wall": end - start, "rc": os.waitstatus_to_exitcode(status),
                  "cpu": usage.ru_utime + usage.ru_stime, "peak_rss": usage.ru_maxrss * 1024}))
"""


def run(argv: list[str], out: Path) -> dict:
    """Run a port once: wall, the forward loop's time (its progress lines), CPU, peak RSS, bytes written."""
    out.unlink(missing_ok=True)
    env = {**os.environ, "BURNSIDE_PROGRESS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", _WRAP, *argv, "-o", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    steps: dict[int, float] = {}
    tail: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            now = time.perf_counter()
            if line.startswith("burnside-progress: step "):
                steps[int(line.split()[2].split("/")[0])] = now
            else:
                tail.append(line)
                del tail[:-20]

    reader = threading.Thread(target=read)
    reader.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    proc.wait()
    reader.join()
    if proc.returncode != 0:
        raise SystemExit(f"the wrapper of {' '.join(argv)} failed:\n{''.join(tail)}")
    r = json.loads(stdout.strip().splitlines()[-1])
    if r.pop("rc") != 0:
        raise SystemExit(f"{' '.join(argv)} -o {out} failed:\n{''.join(tail)}")
    start, end = r.pop("start"), r.pop("end")
    r["loop"] = steps[max(steps)] - steps[0]
    r["before"] = steps[0] - start  # loading the model (and writing its parameters, when recording)
    r["after"] = end - steps[max(steps)]  # finishing the trace: its header, sync, rename
    r["written"] = out.stat().st_size if out.exists() else 0
    out.unlink(missing_ok=True)
    return r


def busy_jiffies() -> tuple[int, int]:
    """The machine's busy and total CPU jiffies so far (/proc/stat's first line)."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def own_cpu() -> float:
    """CPU seconds of this process and its waited-for children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(name: str, argv: list[str], directory: Path, runs: int) -> tuple[dict[str, list[dict]], float]:
    """Each case once as a warm-up, then ``runs`` rounds of every case; the runs, and the share of the machine's
    cores other processes used meanwhile."""
    out = directory / f"{name}.burn.safetensors"
    results: dict[str, list[dict]] = {case: [] for case, _ in CASES}
    for case, switches in CASES:
        r = run([*argv, *switches], out)
        print(f"  {name} {case} (warm-up): wall {r['wall']:.2f}s, loop {r['loop']:.2f}s", flush=True)
    tick = os.sysconf("SC_CLK_TCK")
    (busy0, total0), cpu0, start = busy_jiffies(), own_cpu(), time.perf_counter()
    for k in range(runs):
        for case, switches in CASES:
            r = run([*argv, *switches], out)
            results[case].append(r)
            print(f"  {name} {case} run {k + 1}: wall {r['wall']:.2f}s, loop {r['loop']:.2f}s, "
                  f"peak RSS {gib(r['peak_rss'])}", flush=True)
    (busy1, total1), cpu1, elapsed = busy_jiffies(), own_cpu(), time.perf_counter() - start
    cores = (total1 - total0) / tick / elapsed if elapsed > 0 else 1  # jiffies per second over all cores
    others = max(0.0, (busy1 - busy0) / tick - (cpu1 - cpu0))
    return results, others / (elapsed * cores) if elapsed > 0 else 0.0


def table(name: str, results: dict[str, list[dict]], others: float) -> list[str]:
    """The printed rows of one port."""
    med = {case: {key: statistics.median(r[key] for r in runs) for key in ("wall", "loop", "cpu", "before", "after")}
           for case, runs in results.items()}
    peak = {case: max(r["peak_rss"] for r in runs) for case, runs in results.items()}
    written = {case: max(r["written"] for r in runs) for case, runs in results.items()}
    base = med["eager"]
    lines = [f"{name}: median of {len(results['eager'])} runs after a warm-up; other processes used "
             f"{others:.0%} of the machine's cores meanwhile",
             f"  {'case':<13}{'wall':>8}{'before':>8}{'loop':>9}{'after':>8}{'loop range':>16}{'CPU':>8}"
             f"{'peak RSS':>11}{'written':>11}"
             f"{'loop/eager':>12}{'wall/eager':>12}{'RSS - eager':>13}"]
    for case, runs in results.items():
        loops = [r["loop"] for r in runs]
        m = med[case]
        line = (f"  {case:<13}{m['wall']:>7.2f}s{m['before']:>7.2f}s{m['loop']:>8.3f}s{m['after']:>7.2f}s"
                f"{min(loops):>8.3f}-{max(loops):.3f}s"
                f"{m['cpu']:>7.2f}s{gib(peak[case]):>11}{size(written[case]):>11}")
        if case != "eager":
            ratio = m["loop"] / base["loop"] if base["loop"] > 0 else float("inf")
            more = peak[case] - peak["eager"]
            line += (f"{ratio:>7.2f}x {'ok' if ratio <= 2 else 'NO':<3}{m['wall'] / base['wall']:>8.2f}x"
                     f"{more / MIB:>+9.0f} MiB {'ok' if more <= 512 * MIB else 'NO'}")
        lines.append(line)
    ratio = med["tap-free"]["loop"] / base["loop"] if base["loop"] > 0 else float("inf")
    more = peak["tap-free"] - peak["eager"]
    lines.append(f"  tap-free vs eager: loop {ratio:.2f}x (target 2x: {'met' if ratio <= 2 else 'missed'}), "
                 f"peak RSS {more / MIB:+.0f} MiB (target +512 MiB: {'met' if more <= 512 * MIB else 'missed'})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="classifier,gpt2", help="which ports (default classifier,gpt2)")
    parser.add_argument("--runs", type=int, default=3, help="measured runs of each case after its warm-up (3)")
    parser.add_argument("--classifier-batches", type=int, default=200)
    parser.add_argument("--gpt2-batches", type=int, default=3)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d-model", type=int, default=768)
    parser.add_argument("--heads", type=int, default=None, help="default d_model / 64 (GPT-2's head size)")
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--profile", default="release-o3",
                        help="cargo profile of the ports (default release-o3; `release` is burnside's unoptimised "
                             "one, which `burnside run` builds)")
    parser.add_argument("--bins", type=Path, default=None,
                        help="run the ports in this folder (`classifier`, `gpt2-bench`) instead of building them: "
                             "another revision's, to compare")
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (default: a temp dir in /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the init files")
    args = parser.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if unknown := set(models) - {"classifier", "gpt2"}:
        raise SystemExit(f"--models: unknown {', '.join(sorted(unknown))} (classifier, gpt2)")
    if args.runs < 1:
        raise SystemExit("--runs: at least 1")
    directory = args.dir or Path(tempfile.mkdtemp(prefix="burnside-capture-cost-"))
    directory.mkdir(parents=True, exist_ok=True)
    heads = args.heads or max(1, args.d_model // 64)
    load0 = os.getloadavg()
    began = time.perf_counter()
    report: list[str] = []
    try:
        bins = args.bins or build(args.profile, directory)
        if "classifier" in models:
            init, port = classifier_inputs(directory, args.classifier_batches)
            argv = [str(bins / "classifier"), "--init", str(init), *port]
            results, others = measure("classifier", argv, directory, args.runs)
            report += [f"classifier (rust/classifier, {args.profile}): {args.classifier_batches} batches of "
                       f"[8, 3, 16, 16]", *table("classifier", results, others), ""]
        if "gpt2" in models:
            cfg = {"layers": args.layers, "d_model": args.d_model, "heads": heads, "vocab": args.vocab,
                   "context": args.context, "batches": args.gpt2_batches}
            init, port, params = gpt2_inputs(directory, cfg)
            argv = [str(bins / "gpt2-bench"), "--init", str(init), *port]
            results, others = measure("gpt2", argv, directory, args.runs)
            report += [f"gpt2 (rust/gpt2-bench --inference, {args.profile}): {args.layers} layers, d_model "
                       f"{args.d_model}, {heads} heads, vocab {args.vocab}, {params / 1e6:.1f} M params; "
                       f"{args.gpt2_batches} batches of [1, {args.context}] tokens",
                       *table("gpt2", results, others), ""]
    finally:
        if not args.keep:
            if args.dir is None:
                shutil.rmtree(directory, ignore_errors=True)
            else:
                for f in directory.glob("*.safetensors"):
                    f.unlink()
                shutil.rmtree(directory / "bin", ignore_errors=True)
    load1 = os.getloadavg()
    print()
    print(*report, sep="\n")
    print(f"load average (1 min) {load0[0]:.2f} at the start, {load1[0]:.2f} at the end, on {os.cpu_count()} "
          f"cores; {time.perf_counter() - began:.0f}s in all")
    print("wall: the whole process = before (start to the port's step 0/N progress line: loading, and the "
          "parameters written when recording) + loop (the forward passes, to step N/N) + after (the trace "
          "finished: header, sync, rename); target: tap-free's loop within 2x of eager's, its peak RSS within "
          "eager's + 512 MiB")


if __name__ == "__main__":
    main()

"""Scale benchmark: record, port and compare a GPT-2-small-shaped model (124 M parameters).

The model is nanoGPT's GPT-2: token and learned position embeddings, 12 pre-norm blocks of
d_model 768 with 12 heads (LayerNorm -> causal self-attention, one packed `c_attn`
Linear(768, 2304) split into q, k, v, and `c_proj`; LayerNorm -> MLP `c_fc`, tanh GELU,
`c_proj`), a final LayerNorm, the head tied to the token embedding, the causal mask a
non-persistent buffer; vocab 50257, context 64, batch 1, 3 Adam steps at lr 1e-4, cross-entropy
over every position. The burn port is `rust/gpt2-bench` (built with the `release-o3` profile:
the workspace's `release` profile is unoptimised).

Each case runs in its own process; its peak RSS is that process's high-water mark (VmHWM for the
Python cases, `getrusage(RUSAGE_CHILDREN)` of a one-child wrapper for the commands). The cases:

- `plain`: the PyTorch loop, no recording; `record`: `burnside.torch.record` (activations and
  layer inputs on, the defaults);
- `plain64`: the same loop on a float64 copy, the float32 model kept alive (as `record_reference` keeps it); `reference`: `burnside.reference.record_reference`
  (layer inputs on, its `burn-adam` variant too unless `--no-variants`, or when the disk is short);
- `burn plain`: the port's `--no-record` loop (the same steps and burn optimizer, nothing
  written); `burn record`: the port run by `burnside check`'s contract
  (`gpt2-bench --init INIT -o OUT --steps 3`, INIT made from the PyTorch trace by
  `burnside.burn.port.init_from_trace`, as `burnside check` makes it). `burnside check` itself
  builds the `release` profile only, so the benchmark runs the release-o3 binary directly;
- `compare`: `burnside compare T B --reference R`; `report`: the same with `--report page.html`.

Python cases time the loop alone (not the import of torch or building the model); the commands'
wall is the whole process. The targets for each recorder are against its own plain loop: peak RSS <=
plain + 512 MiB; wall <= (plain + bytes written / disk speed) x 1.5 (the reference trains its copy twice
with its variant: 2 x plain64). The disk speed is measured just before each recorder, as it writes
(`--disk-mib` MiB through the page cache, then fsync, in the output directory), and that file is kept
until the recorder ends. On this project's machines, a VM that hands freed memory back to its host
within seconds, what a write costs is mostly the page cache's fresh pages, and how many are fresh
depends on what ran just before: one measure at the start (the old way) was 295 to 1329 MB/s for
the same disk, and the recorders' writes do not follow it. Memory a process frees goes back to the
host 2 to 6 seconds later (measured: 4 GiB touched again 0.3 s after it was freed took 0.3 s, 3 s
after 4.6 s, 6 s after 9.9 s), so the benchmark waits `--settle` seconds (15) before each case and
each measure: every case, plain loops included, starts on the fresh pages a new process gets, and
the measure's file, kept, leaves the recorder none freed a moment before. The disk's own speed
(`disk_speed(drop_behind=True)`: the page cache dropped behind the writes) is printed beside.

`--inference` checks the same model as a pretrained model's inference port instead, the way most users port
one: `--steps` batches forward, `plain` in eval mode under no_grad, `record` by `burnside.torch.record_forward`,
`plain64` and `reference` by `record_forward_reference` on its float64 copy; the port (`gpt2-bench --inference`)
loads the weights from the forward trace's init file on a device without autodiff and `burnside_trace::Inference`
records each pass; the same targets.

    python benchmarks/gpt2_scale.py [--layers 12 --d-model 768 --vocab 50257 --context 64]
        [--dir DIR] [--steps 3] [--no-variants] [--full-steps 0,-1] [--disk-mib 1024] [--settle 15] [--keep]
        [--inference]

A quick run: `--layers 2 --d-model 128 --vocab 1000`.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from record_memory import DISK_SPEED_FILE, disk_speed  # the same write + fsync measure (this folder is on sys.path)

REPO = Path(__file__).resolve().parent.parent
CRATE = REPO / "rust" / "gpt2-bench"
BIN = "gpt2-bench"
LR = 1e-4


def build_model(layers: int, d_model: int, heads: int, vocab: int, context: int):
    """nanoGPT's GPT-2 at these sizes, initialised as GPT-2 (normal 0.02, residual projections scaled)."""
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(d_model, 3 * d_model)
            self.c_proj = nn.Linear(d_model, d_model)
            self.register_buffer("bias", torch.tril(torch.ones(context, context)).view(1, 1, context, context),
                                 persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(d_model, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // heads))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            y = torch.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(d_model, 4 * d_model)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * d_model, d_model)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(d_model)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(d_model)
            self.mlp = Mlp()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Gpt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, d_model)
            self.wpe = nn.Embedding(context, d_model)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab, bias=False)
            self.lm_head.weight = self.wte.weight
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
                elif p.dim() == 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith(".bias") and ".ln_" not in name and not name.startswith("ln_f"):
                    nn.init.zeros_(p)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            t = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return logits.view(-1, logits.shape[-1])

    return Gpt()


def _inference_case(case: str, model, batches: list[dict], out: str) -> int:
    """One inference case: the pretrained model's forward passes, plain (eval, no_grad; `plain64` on a float64
    copy with the float32 model alive, as the reference keeps it), or recorded by `record_forward` or
    `record_forward_reference`; the bytes written."""
    import torch

    if case in ("plain", "plain64"):
        if case == "plain64":
            model_f32 = model  # noqa: F841 (kept alive, as record_forward_reference keeps the caller's model)
            model = copy.deepcopy(model).double()
        model.eval()
        with torch.no_grad():
            for batch in batches:
                model(batch["x"])
        return 0
    if case == "record":
        from burnside.torch import record_forward
        return record_forward(model, batches, out).stat().st_size
    if case == "reference":
        from burnside.recording.reference import record_forward_reference
        return record_forward_reference(model, batches, out).stat().st_size
    raise SystemExit(f"unknown case {case}")


def run_python_case(case: str, out: str, cfg: dict) -> None:
    """One case in this process; prints its JSON figures as the last line."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = build_model(cfg["layers"], cfg["d_model"], cfg["heads"], cfg["vocab"], cfg["context"])
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    batches = []
    for _ in range(cfg["steps"]):
        seq = torch.randint(0, cfg["vocab"], (1, cfg["context"] + 1))
        batches.append({"x": seq[:, :-1].contiguous(), "y": seq[0, 1:].contiguous()})
    params = sum(p.numel() for p in model.parameters())
    if cfg.get("inference"):
        # one pass first, untimed: a new process's first forward pass costs seconds on this VM (its pages are
        # fresh; measured 4.1 s, then 0.63 s for the same three batches), which would swamp what recording adds
        with torch.no_grad():
            model.eval()(batches[0]["x"])
        model.train()
    start = time.perf_counter()
    written = 0
    if cfg.get("inference"):
        written = _inference_case(case, model, [{"x": b["x"]} for b in batches], out)
    elif case in ("plain", "plain64"):
        if case == "plain64":
            # the reference's floor: a float64 copy trained while the caller's float32 model stays alive
            # (record_reference deep-copies and leaves the original untouched)
            model_f32 = model
            model = copy.deepcopy(model_f32).double()
            opt = torch.optim.Adam(model.parameters(), lr=LR)
        for batch in batches:
            loss = nn.functional.cross_entropy(model(batch["x"]), batch["y"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    elif case == "record":
        from burnside.torch import record
        record(model, opt, batches, out, steps=cfg["steps"], activations=True, layer_inputs=True,
               full_steps=cfg["full_steps"])
        written = Path(out).stat().st_size
    elif case == "reference":
        from burnside.recording.reference import record_reference, reference_files
        files = reference_files(model, opt, out, variants=cfg["variants"])
        record_reference(model, opt, batches, out, steps=cfg["steps"], layer_inputs=True,
                         variants=cfg["variants"], full_steps=cfg["full_steps"])
        written = sum(f.stat().st_size for f in files)
    else:
        raise SystemExit(f"unknown case {case}")
    wall = time.perf_counter() - start
    hwm = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"wall": wall, "peak_rss": hwm, "written": written, "params": params}))


_WRAP = """
import json, resource, subprocess, sys, tempfile, time
start = time.perf_counter()
with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
    proc = subprocess.Popen(sys.argv[1:], stdout=out, stderr=err, text=True)
    # private memory (RssAnon: the heap, not the memory-mapped traces' pages RSS also counts), sampled every 20 ms
    status, anon = f"/proc/{proc.pid}/status", 0
    while proc.poll() is None:
        try:
            with open(status) as f:
                anon = max(anon, next((int(l.split()[1]) * 1024 for l in f if l.startswith("RssAnon:")), 0))
        except OSError:
            pass
        time.sleep(0.02)
    wall = time.perf_counter() - start
    out.seek(0), err.seek(0)
    stdout, stderr = out.read(), err.read()
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
# compare's per-tensor rows start with `step`: keep its summary lines only
summary = "\\n".join(line for line in stdout.splitlines() if not line.startswith("step"))
print(json.dumps({"wall": wall, "peak_rss": peak, "private": anon, "rc": proc.returncode,
                  "stdout": summary[-20000:], "stderr": stderr[-4000:]}))
"""


def run_command(argv: list[str]) -> dict:
    """Run ``argv`` under a wrapper whose only child it is: wall and that child's peak RSS."""
    proc = subprocess.run([sys.executable, "-c", _WRAP, *argv], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"wrapper failed for {argv}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def python_case(case: str, out: Path, cfg: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--case", case, "--case-out", str(out),
                           "--case-cfg", json.dumps(cfg)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"case {case} failed:\n{proc.stderr[-6000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_port() -> Path:
    """The port's binary, built with the release-o3 profile in burnside's shared target directory."""
    from burnside.burn.cargo import target_dir
    target = target_dir()
    cmd = ["cargo", "build", "--profile", "release-o3", "-p", "gpt2-bench"]
    proc = subprocess.run(cmd, cwd=REPO / "rust", env={**os.environ, "CARGO_TARGET_DIR": str(target)},
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    return target / "release-o3" / BIN


def estimate_bytes(cfg: dict, variants: bool) -> int:
    """The traces' size: a float32 trace holds 4 x params per step (params_after, grads, Adam's two moments) and
    step 0's params_before (later ones are aliases), in float32 for PyTorch's and burn's traces and float64 for
    the reference (twice with its variant); activations and layer inputs add a few percent at this context."""
    d, v, c, layers = cfg["d_model"], cfg["vocab"], cfg["context"], cfg["layers"]
    params = v * d + c * d + layers * (12 * d * d + 13 * d) + 2 * d
    if cfg.get("inference"):  # the parameters once (float32 twice, float64 once) and a few MiB of layers per batch
        return int((4 * params * 4 + cfg["steps"] * (64 << 20)) * 1.05)
    full = cfg["steps"] if cfg.get("full_steps") is None else len(set(k % cfg["steps"] for k in cfg["full_steps"]))
    f32_trace = 4 * params * (4 * full + 1)
    return int(f32_trace * (2 + 2 * (2 if variants else 1)) * 1.05)


def gib(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def size(n: float) -> str:
    """A file's size: GiB, or MiB below 1 GiB."""
    return gib(n) if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d-model", type=int, default=768)
    parser.add_argument("--heads", type=int, default=None, help="default d_model / 64 (GPT-2's head size)")
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the traces go (default: a temp dir in /tmp)")
    parser.add_argument("--no-variants", action="store_true", help="record the reference without its burn-adam variant")
    parser.add_argument("--full-steps", default=None,
                        help="steps recorded in full, e.g. 0,-1 (the others as statistics, on every side)")
    parser.add_argument("--disk-mib", type=int, default=1024)
    parser.add_argument("--settle", type=float, default=15.0,
                        help="seconds to wait before each case and each disk measure (default 15; see above)")
    parser.add_argument("--inference", action="store_true",
                        help="the pretrained model's inference check instead: --steps batches forward "
                             "(record_forward, record_forward_reference, burn's Inference), compared")
    parser.add_argument("--keep", action="store_true", help="keep the traces and the report")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--case-out", help=argparse.SUPPRESS)
    parser.add_argument("--case-cfg", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_python_case(args.case, args.case_out, json.loads(args.case_cfg))
        return
    heads = args.heads or max(1, args.d_model // 64)
    cfg = {"layers": args.layers, "d_model": args.d_model, "heads": heads, "vocab": args.vocab,
           "context": args.context, "steps": args.steps, "variants": not args.no_variants and not args.inference,
           "inference": args.inference,
           "full_steps": None if args.full_steps is None else [int(k) for k in args.full_steps.split(",")]}
    directory = args.dir or Path(tempfile.mkdtemp(prefix="burnside-gpt2-scale-"))
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    need = estimate_bytes(cfg, cfg["variants"])
    if cfg["variants"] and need + (6 << 30) > free:
        cfg["variants"] = False
        need = estimate_bytes(cfg, False)
        print(f"disk: {gib(free)} free, too little for the reference's variant: recording it with variants=False")
    if need + (2 << 30) > free:
        raise SystemExit(f"disk: {gib(free)} free in {directory}, the traces need about {gib(need)}")
    print(f"disk: {gib(free)} free in {directory}; the traces need about {gib(need)}", flush=True)
    torch_trace, ref, burn_trace = (directory / n for n in ("torch.safetensors", "ref.safetensors",
                                                            "burn.safetensors"))
    init, page = directory / "init.safetensors", directory / "page.html"
    rows: dict[str, dict] = {}
    speeds: dict[str, float] = {}
    try:
        binary = build_port()
        own_speed = disk_speed(directory, args.disk_mib, drop_behind=True)

        def settle() -> None:
            """Wait for the memory the last step freed to go back to the host (a few seconds, measured), so the
            next case finds the fresh pages any process would, not pages another freed a moment before."""
            time.sleep(args.settle)

        def measured(case: str, run):
            """``run()`` with the disk measured just before it, the measure's file kept until it ends."""
            settle()
            speeds[case] = disk_speed(directory, args.disk_mib, keep=True)
            try:
                return run()
            finally:
                (directory / DISK_SPEED_FILE).unlink(missing_ok=True)

        for case, out in (("plain", None), ("record", torch_trace), ("plain64", None), ("reference", ref)):
            if out is None:
                settle()
                rows[case] = python_case(case, directory / "none", cfg)
            else:
                rows[case] = measured(case, lambda case=case, out=out: python_case(case, out, cfg))
            print(f"  {case}: {rows[case]['wall']:.1f}s", flush=True)
        from burnside.burn.port import init_from_trace
        from burnside.trace import open_trace
        start = time.perf_counter()
        init_from_trace(open_trace(torch_trace), init)
        init_wall, init_size = time.perf_counter() - start, init.stat().st_size
        port = [str(binary), "--init", str(init), "--steps", str(args.steps), "--heads", str(heads),
                *(["--inference"] if args.inference else [])]
        for case, argv in (("burn plain", [*port, "-o", str(directory / "unused.safetensors"), "--no-record"]), ("burn record", [*port, "-o", str(burn_trace)])):
            if case == "burn plain":
                settle()
                r = run_command(argv)
            else:
                r = measured(case, lambda argv=argv: run_command(argv))
            if r["rc"] != 0:
                raise SystemExit(f"{case} failed ({' '.join(argv)}):\n{r['stderr']}")
            r["written"] = burn_trace.stat().st_size if case == "burn record" else 0
            rows[case] = r
            print(f"  {case}: {r['wall']:.1f}s", flush=True)
        compare = ["burnside", "compare", str(torch_trace), str(burn_trace), "--reference", str(ref)]
        for case, argv in (("compare", compare), ("report", [*compare, "--report", str(page)])):
            settle()
            rows[case] = run_command([str(Path(sys.executable).parent / argv[0]), *argv[1:]])
            print(f"  {case}: {rows[case]['wall']:.1f}s (exit {rows[case]['rc']})", flush=True)
        rows["report"]["written"] = page.stat().st_size if page.exists() else 0
    finally:
        if not args.keep:
            if args.dir is None:
                shutil.rmtree(directory, ignore_errors=True)
            else:
                for f in directory.glob("*.safetensors"):
                    f.unlink()
                page.unlink(missing_ok=True)
    params = rows["plain"]["params"]
    print()
    print(f"model: GPT-2 shape, {args.layers} layers, d_model {args.d_model}, {heads} heads, vocab {args.vocab}, "
          f"context {args.context}, batch 1, tied head: {params / 1e6:.1f} M params; "
          + (f"inference: {args.steps} batches forward" if args.inference else
             f"{args.steps} Adam steps (lr {LR}); reference variants {'on (burn-adam)' if cfg['variants'] else 'off'}; ")
          + ("" if args.inference else 'every step in full' if cfg['full_steps'] is None
             else 'full steps %s, others as statistics' % cfg['full_steps']))
    print(f"disk sequential write (write + fsync, {args.disk_mib} MiB, through the page cache as the recorders "
          f"write), measured before each recorder: " + ", ".join(f"{c} {v / 1e6:.0f} MB/s" for c, v in speeds.items())
          + f"; the disk itself (the page cache dropped behind the writes): {own_speed / 1e6:.0f} MB/s")
    print(f"init file from the PyTorch trace (init_from_trace, in the driver): {init_wall:.1f}s, {size(init_size)}")
    print(f"{'case':<12} {'wall':>9} {'peak RSS':>10} {'written':>10}   {'RSS target':>13}   {'wall target':>13}")
    floors = {"record": ("plain", 1), "reference": ("plain64", 2 if cfg["variants"] else 1),
              "burn record": ("burn plain", 1)}
    ok = True
    for case, r in rows.items():
        line = f"{case:<12} {r['wall']:>8.2f}s {gib(r['peak_rss']):>10} {size(r.get('written', 0)):>10}"
        if case in floors:
            base, runs = floors[case]
            rss_target = rows[base]["peak_rss"] + (512 << 20)
            wall_target = (runs * rows[base]["wall"] + r["written"] / speeds[case]) * 1.5
            rss_ok, wall_ok = r["peak_rss"] <= rss_target, r["wall"] <= wall_target
            ok &= rss_ok and wall_ok
            line += (f"   {gib(rss_target):>10} {'ok' if rss_ok else 'NO'}   {wall_target:>9.2f}s "
                     f"{'ok' if wall_ok else 'NO'}   (vs {base}{' x 2' if runs == 2 else ''})")
        elif "rc" in r and case in ("compare", "report"):
            line += f"   exit {r['rc']}, peak private {r['private'] / (1 << 20):.0f} MiB (target 256)"
        print(line)
    print("recorder targets met" if ok else "recorder targets missed")
    # compare's summary: every line but the per-tensor rows
    out = [line for line in rows["compare"]["stdout"].strip().splitlines() if not line.startswith("step")]
    print(f"compare says (exit {rows['compare']['rc']}):", *out, sep="\n  ")


if __name__ == "__main__":
    main()

"""A 1.24 B-parameter Llama's greedy generation checked end to end: both sides, the float64 reference and compare.

The model has Llama-3.2-1B's shape (hidden 2048, 16 layers, 32 heads, 8 key/value heads of 64, intermediate 8192,
vocabulary 128256, RMSNorm epsilon 1e-5, RoPE theta 500000 with llama3's scaling, lm_head tied to the token
embedding), random weights drawn from a seed and saved as Hugging Face ships the model: bf16 safetensors and
its config.json (nothing is downloaded). A 16-token prompt and 8 greedy steps are recorded by
`burnside.torch.record_generate` (PyTorch's model loaded as float32: the exact widening of bf16) and its float64
reference by `burnside.reference.record_generate_reference`; the burn port is tests/burn/user_ports/llama (the
tiny Llama test's port, which reads its dimensions from config.json), loading the bf16 checkpoint into an f32
model with burn-store; `burnside compare` judges it with the reference.

Each stage runs as its own process, one after the other (never two 1 B-parameter processes at once), and is
measured as one: wall time and peak RSS (`os.wait4`'s `ru_maxrss`, the process and anything it waited for). A
stage whose process grows past `--max-gib` (12) is stopped and the run ends there. The stages are those of
`burnside check` with the port run directly (a check builds it, writes the init file, runs it, compares):

- `make`: the model drawn from `--seed` and saved as bf16 safetensors + config.json;
- `torch`: `record_generate` (no reference), with the greedy run that chooses the tokens;
- `reference`: `record_generate_reference` (the same greedy run, then the steps in float64);
- `build`: the port built as `burnside check` builds it (cargo's release profile of the port's crate), at
  `--opt-level` (default 3: `CARGO_PROFILE_RELEASE_OPT_LEVEL`, in a target directory of its own beside burnside's,
  `cargo-target-o3`, so burnside's opt-level 0 build is left as it is; the first build there is burn's, minutes);
- `init`: the init file `burnside check` hands the port (`burnside.burn.port.init_from_trace`);
- `burn`: the port, `user_llama --init INIT -o OUT --batches 9 --checkpoint model.safetensors --taps-only`;
- `compare`: `burnside compare torch.safetensors burn.safetensors --reference reference.safetensors`.

`--statistics` passes `STATISTICS` to both recorders, for the recorders that take it (checked with
`inspect.signature`); `--bug NAME` runs the port with one of its slips (`no-rope-scaling`: llama3's scaling left
out). The traces are deleted at the end unless `--keep`.

    python benchmarks/llama_1b.py [--dir DIR] [--seed 0] [--steps 8] [--prompt 16] [--bug NAME] [--statistics]
        [--opt-level 3] [--keep] [--tiny]

`--tiny` runs the same pipeline on a model of the same kind a few MB large, in seconds.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PORT = REPO / "tests" / "burn" / "user_ports" / "llama"
BIN = "user_llama"

#: Llama-3.2-1B's config.json as Hugging Face ships it (transformers 4.45's keys: `rope_theta` and `rope_scaling`).
LLAMA_1B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256,
}
#: The same kind of model, small (`--tiny`): a check of the pipeline in seconds.
TINY = {**LLAMA_1B, "hidden_size": 64, "head_dim": 16, "intermediate_size": 128, "num_attention_heads": 4,
        "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2}

#: What `--statistics` passes to `record_generate` and `record_generate_reference`: parameters and layers recorded
#: as statistics rather than in full. The one line to change if the recorders name the option otherwise.
STATISTICS = {"statistics": True}


# ---- the stages, each run in its own process (`--stage NAME`) ----

def stage_make(folder: Path, seed: int, tiny: bool) -> None:
    import safetensors.torch
    import torch
    import transformers

    config = TINY if tiny else LLAMA_1B
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig.from_pretrained(folder)).to(torch.bfloat16)
    state = model.state_dict()
    if config["tie_word_embeddings"]:
        del state["lm_head.weight"]  # tied: Hugging Face's checkpoint holds embed_tokens.weight only
    safetensors.torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _load(folder: Path):
    import torch
    import transformers

    # bf16 -> float32, exact; the tied lm_head is embed_tokens' weight again
    model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    return model


def _prompt(seed: int, length: int, vocab: int):
    import torch

    return torch.randint(vocab, (1, length), generator=torch.Generator().manual_seed(seed + 1))


def _options(function, statistics: bool) -> dict:
    if not statistics:
        return {}
    missing = [k for k in STATISTICS if k not in inspect.signature(function).parameters]
    if missing:
        sys.exit(f"--statistics: the installed {function.__module__}.{function.__name__} takes no "
                 f"{', '.join(missing)}; run without --statistics (or install the recorder that has it)")
    return dict(STATISTICS)


def stage_record(folder: Path, seed: int, prompt: int, steps: int, statistics: bool, reference: bool) -> None:
    from burnside.recording.reference import record_generate_reference
    from burnside.torch import record_generate

    model = _load(folder)
    ids = _prompt(seed, prompt, model.config.vocab_size)
    if reference:
        record_generate_reference(model, ids, folder / "reference.safetensors", steps=steps,
                                  **_options(record_generate_reference, statistics))
    else:
        record_generate(model, ids, folder / "torch.safetensors", steps=steps,
                        **_options(record_generate, statistics))


def stage_build(folder: Path) -> None:
    sys.path.insert(0, str(REPO))
    from burnside.burn.cargo import build
    from tests.burn.user_port_harness import copy_crate

    # copied out as the port's test copies it (the installed burnside-trace, burnside's Cargo.lock)
    crate = folder / "port"
    shutil.rmtree(crate, ignore_errors=True)
    print(build(copy_crate(PORT, crate), bins=[BIN], reuse=True).executables[BIN])


def stage_init(folder: Path) -> None:
    from burnside.burn.port import init_from_trace
    from burnside.trace import open_trace

    init_from_trace(open_trace(folder / "torch.safetensors"), folder / "init.safetensors")


# ---- the driver ----

def _rss_gib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def build_env(opt_level: int) -> dict[str, str]:
    """The build's environment: at opt-level 0 burnside's own; else the release profile at ``opt_level`` in a
    target directory of its own (`{burnside's}-o{level}`), so the shared opt-level 0 build is not replaced."""
    from burnside.burn.locate import target_dir

    if opt_level == 0:
        return dict(os.environ)
    return {**os.environ, "CARGO_PROFILE_RELEASE_OPT_LEVEL": str(opt_level),
            "CARGO_TARGET_DIR": f"{target_dir()}-o{opt_level}"}


def run(name: str, command: list[str], max_gib: float, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run one stage; (wall seconds, peak RSS GiB, stdout). A stage past ``max_gib`` is stopped, and the run ends."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    over: list[float] = []

    def watch() -> None:  # the stage's own process (the port is its own stage, so this covers every big one)
        while proc.poll() is None:
            rss = _rss_gib(proc.pid)
            if rss > max_gib:
                over.append(rss)
                os.kill(proc.pid, signal.SIGKILL)
                return
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    out_chunks: list[str] = []
    err_chunks: list[str] = []
    readers = [threading.Thread(target=lambda s=s, c=c: c.append(s.read()), daemon=True)
               for s, c in ((proc.stdout, out_chunks), (proc.stderr, err_chunks))]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    wall = time.perf_counter() - start
    peak = usage.ru_maxrss / 2**20
    out, err = "".join(out_chunks), "".join(err_chunks)
    print(f"{name:<10} {wall:8.1f} s  {peak:6.2f} GiB", flush=True)
    if over:
        sys.exit(f"{name}: stopped at {over[0]:.2f} GiB, over --max-gib {max_gib}")
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and name != "compare"):
        sys.exit(f"{name} failed (exit {proc.returncode}):\n{out[-3000:]}\n{err[-3000:]}")
    return wall, peak, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="where the checkpoint and traces go (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=8, help="greedy decode steps after the prompt")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--bug", help="a slip of the port's (`--bug NAME` of tests/burn/user_ports/llama)")
    parser.add_argument("--statistics", action="store_true", help=f"pass {STATISTICS} to the recorders")
    parser.add_argument("--max-gib", type=float, default=12.0, help="stop a stage whose process grows past this")
    parser.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=3,
                        help="the port's build (0: burnside's own profile and target directory)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint and traces")
    parser.add_argument("--tiny", action="store_true", help="a model of the same kind, a few MB")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.prompt < 1:
        sys.exit("--steps and --prompt must be at least 1")

    if args.stage:
        folder = args.dir
        if args.stage == "make":
            stage_make(folder, args.seed, args.tiny)
        elif args.stage in ("torch", "reference"):
            stage_record(folder, args.seed, args.prompt, args.steps, args.statistics, args.stage == "reference")
        elif args.stage == "build":
            stage_build(folder)
        elif args.stage == "init":
            stage_init(folder)
        return

    folder = args.dir or Path(tempfile.mkdtemp(prefix="llama-1b-"))
    folder.mkdir(parents=True, exist_ok=True)
    env_python = [sys.executable, str(Path(__file__).resolve())]
    common = ["--dir", str(folder), "--seed", str(args.seed), "--steps", str(args.steps), "--prompt",
              str(args.prompt), *(["--tiny"] if args.tiny else []), *(["--statistics"] if args.statistics else [])]
    shape = "tiny" if args.tiny else "Llama-3.2-1B"
    print(f"{shape} shape, seed {args.seed}, prompt {args.prompt} tokens, {args.steps} greedy steps, port at "
          f"opt-level {args.opt_level}, in {folder}"
          + (f", port slip {args.bug}" if args.bug else ""), flush=True)
    print(f"{'stage':<10} {'wall':>10}  {'peak RSS':>10}", flush=True)
    figures: dict[str, tuple[float, float]] = {}
    try:
        for stage in ("make", "torch", "reference", "build", "init"):
            wall, peak, out = run(stage, [*env_python, "--stage", stage, *common], args.max_gib,
                                  env=build_env(args.opt_level) if stage == "build" else None)
            figures[stage] = (wall, peak)
            if stage == "build":
                binary = out.strip().splitlines()[-1]
        burn = folder / "burn.safetensors"
        port = [binary, "--init", str(folder / "init.safetensors"), "-o", str(burn), "--batches",
                str(args.steps + 1), "--checkpoint", str(folder / "model.safetensors"), "--taps-only",
                *(["--bug", args.bug] if args.bug else [])]
        figures["burn"] = run("burn", port, args.max_gib)[:2]
        compare = [sys.executable, "-c", "from burnside.cli import main; main()", "compare",
                   str(folder / "torch.safetensors"), str(burn), "--reference", str(folder / "reference.safetensors")]
        wall, peak, out = run("compare", compare, args.max_gib)
        figures["compare"] = (wall, peak)
        sizes = {f.name: f.stat().st_size / 1e9 for f in sorted(folder.glob("*.safetensors"))}
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
        elif not args.keep:
            for f in folder.glob("*.safetensors"):
                f.unlink()
    total = sum(w for w, _ in figures.values())
    checked = total - figures["make"][0] - figures["build"][0]
    print(f"{'total':<10} {total:8.1f} s  {max(p for _, p in figures.values()):6.2f} GiB  (the check without "
          f"making the model and building the port: {checked:.1f} s)")
    print("files: " + ", ".join(f"{name} {size:.2f} GB" for name, size in sizes.items()))
    lines = out.splitlines()
    print("\n".join(line for line in lines if line.startswith(("worst=", "generation", "D0"))))


if __name__ == "__main__":
    main()

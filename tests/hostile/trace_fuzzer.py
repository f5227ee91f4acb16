"""A seeded mutation fuzzer for every file burnside reads: traces (both forms), init files, tolerance files.

Seeds are real files: small traces written by `burnside.trace.write_trace`, one recorded by
`burnside.examples.a1.record_torch` when torch is importable, an init file, tolerance files in TOML and
JSON. Each mutant goes through the whole path a command takes: `open_trace` -> `compare_with_evidence`
(against the unmutated seed, both ways round) -> `diagnose`, then `convert_trace` to the other form
and back. An outcome is one of

- rejected: a BurnsideError (the CLI prints one line and exits 2): fine;
- accepted: opened, compared, diagnosed, converted bit for bit, with the verdict an independent
  element-by-element reference gives;
- crash: any other exception; hang: longer than the per-case timeout;
- wrong: accepted but with a verdict, a conversion or a tolerance the reference disagrees with.

The mutations are in tests/hostile/trace_mutations.py. Used by tests/hostile/test_fuzz.py (a bounded run, fixed
seed) and benchmarks/fuzz_traces.py.
"""

from __future__ import annotations

import io
import json
import math
import random
import signal
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
from rich.console import Console

import burnside
from burnside.compare import Tolerance, Tolerances, load_tolerances
from burnside.optimizers.settings import optimizer_differences
from burnside.pipeline import compare_with_evidence
from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.report import comparison_json, render
from burnside.trace import Trace, convert_trace, open_trace, parse_name, write_trace
from burnside.trace.dtypes import bf16_to_f32
from tests.hostile.trace_mutations import join_safetensors, split_safetensors, mutate

_PACKAGE = Path(burnside.__file__).resolve().parent  # the frames a crash site is named by
FORMS = ("safetensors", "json", "init", "tolerances.toml", "tolerances.json")

@dataclass
class Crash:
    """One distinct crash site: the exception and the innermost burnside frame."""

    form: str
    mutation: str
    error: str
    site: str
    sample: Path | None


@dataclass
class FormCounts:
    """What happened to one form's mutants."""

    mutants: int = 0
    accepted: int = 0
    rejected: int = 0
    crashes: int = 0
    hangs: int = 0
    wrong: int = 0
    mutations: Counter = field(default_factory=Counter)


@dataclass
class Report:
    """A fuzzing run's figures."""

    counts: dict[str, FormCounts] = field(default_factory=lambda: {f: FormCounts() for f in FORMS})
    crashes: dict[tuple[str, str], Crash] = field(default_factory=dict)
    hangs: list[tuple[str, str, Path | None]] = field(default_factory=list)
    wrong: list[tuple[str, str, str, Path | None]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The figures, one line per form, then every crash site, hang and wrong verdict."""
        out = [f"{'form':<17}{'mutants':>8}{'accepted':>10}{'rejected':>10}{'crashes':>9}{'hangs':>7}{'wrong':>7}"]
        for form, c in self.counts.items():
            if c.mutants:
                out.append(f"{form:<17}{c.mutants:>8}{c.accepted:>10}{c.rejected:>10}{c.crashes:>9}{c.hangs:>7}"
                           f"{c.wrong:>7}")
        classes = Counter()
        for c in self.counts.values():
            classes.update(c.mutations)
        out.append("mutation classes: " + ", ".join(f"{k} {v}" for k, v in sorted(classes.items())))
        for crash in self.crashes.values():
            out.append(f"CRASH [{crash.form} {crash.mutation}] {crash.error} at {crash.site} ({crash.sample})")
        for form, mutation, sample in self.hangs:
            out.append(f"HANG [{form} {mutation}] ({sample})")
        for form, mutation, why, sample in self.wrong:
            out.append(f"WRONG [{form} {mutation}] {why} ({sample})")
        return out


class _Hang(BaseException):
    """Raised by the per-case alarm; a BaseException so that no `except Exception` swallows it."""


# ---------------------------------------------------------------- seeds


def _metadata(steps: int, optimizer: dict, params: list[str]) -> dict:
    return {"framework": "pytorch", "framework_version": "test", "device": "cpu", "dtype": "float32",
            "steps": steps, "optimizer": optimizer, "params": params, "grads_len": [len(params)] * steps}


def _seed_traces(rng: np.random.Generator) -> list[tuple[dict[str, np.ndarray], dict]]:
    """Small valid traces covering the stages, every dtype numpy can hold, non-finite values and NaN payloads."""
    params = ["fc.weight", "fc.bias"]
    out = []
    for steps, optimizer in ((1, {"name": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                                  "weight_decay": 0.0, "weight_decay_kind": "l2"}),
                             (2, {"name": "adam", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-08,
                                  "weight_decay": 0.0, "weight_decay_kind": "l2", "amsgrad": False})):
        t: dict[str, np.ndarray] = {}
        w = rng.standard_normal((3, 4)).astype(np.float32)
        b = rng.standard_normal(3).astype(np.float32)
        for k in range(steps):
            t[f"step{k}.inputs.x"] = rng.standard_normal((2, 4)).astype(np.float32)
            t[f"step{k}.inputs.y"] = np.array([0, 2], dtype=np.int64)
            t[f"step{k}.params_before.fc.weight"] = w
            t[f"step{k}.params_before.fc.bias"] = b
            t[f"step{k}.logits"] = rng.standard_normal((2, 3)).astype(np.float32)
            t[f"step{k}.loss"] = np.array(1.25, dtype=np.float32)
            gw, gb = ((rng.standard_normal((3, 4)) * 0.1).astype(np.float32),
                      (rng.standard_normal(3) * 0.1).astype(np.float32))
            t[f"step{k}.grads.fc.weight"], t[f"step{k}.grads.fc.bias"] = gw, gb
            w, b = (w - 0.1 * gw).astype(np.float32), (b - 0.1 * gb).astype(np.float32)
            t[f"step{k}.params_after.fc.weight"], t[f"step{k}.params_after.fc.bias"] = w, b
            if optimizer["name"] == "adam":
                t[f"step{k}.optim.exp_avg.fc.weight"] = (0.1 * gw).astype(np.float32)
                t[f"step{k}.optim.step.fc.weight"] = np.array(k + 1, dtype=np.float32)
        t[f"step{steps - 1}.loss_after"] = np.array(1.0, dtype=np.float32)
        out.append((t, _metadata(steps, optimizer, params)))
    odd, meta = dict(out[0][0]), dict(out[0][1])
    nan_payload = np.array([0x7FC00001, 0xFFC00000, 0x7F800001], dtype=np.uint32).view(np.float32)
    odd["step0.logits"] = np.array([[np.nan, np.inf, -np.inf], [-0.0, 1e-45, 3.4028235e38]], dtype=np.float32)
    odd["step0.extra.payload"] = nan_payload
    odd["step0.extra.f64"] = np.array([np.pi, 1e-300, -0.0, np.nan], dtype=np.float64)
    odd["step0.extra.f16"] = np.array([0.1, 65504, -np.inf], dtype=np.float16)
    odd["step0.extra.ints"] = np.array([[-(2**63), 2**63 - 1]], dtype=np.int64)
    odd["step0.extra.u8"] = np.array([0, 255], dtype=np.uint8)
    odd["step0.extra.bool"] = np.array([True, False])
    odd["step0.extra.empty"] = np.zeros((0, 5), dtype=np.float32)
    out.append((odd, meta))
    return out


_BF16_JSON = {
    "format": "burnside-trace", "version": 1,
    "metadata": _metadata(1, {"name": "sgd", "lr": 0.1}, ["w"]),
    "tensors": {"step0.params_before.w": {"dtype": "BF16", "shape": [3], "data": [1.0, "NaN", -0.0]},
                "step0.loss": {"dtype": "BF16", "shape": [], "data": [0.5]},
                "step0.loss_after": {"dtype": "F32", "shape": [], "data": [0.25]}},
}

_TOLERANCE_TOML = """[default]
atol = 1e-6
rtol = 0.0

[tensors."*.optim.exp_avg.*"]
atol = 1e-9
ulps = 4

[tensors."step0.grads.fc[.]weight"]
rtol = 1e-3
"""
_TOLERANCE_JSON = json.dumps({"default": {"atol": 1e-6}, "tensors": {"*.logits": {"atol": 1e-5, "ulps": 2},
                                                                   "step1.*": {"rtol": 0.5}}}, indent=1)


@dataclass
class Seed:
    """One valid file to mutate, and the trace it is (for the verdict reference)."""

    form: str
    data: bytes
    trace: Trace | None


def make_seeds(workdir: Path, with_torch: bool = True) -> dict[str, list[Seed]]:
    """Valid seed files for every form, written by burnside's own writers (and PyTorch's recorder)."""
    rng = np.random.default_rng(11)
    seeds: dict[str, list[Seed]] = {form: [] for form in FORMS}
    sources: list[Path] = []
    for i, (tensors, meta) in enumerate(_seed_traces(rng)):
        sources.append(write_trace(workdir / f"seed{i}.safetensors", tensors, meta))
        sources.append(write_trace(workdir / f"seed{i}.json", tensors, meta))
    bf16 = workdir / "seed-bf16.json"
    bf16.write_text(json.dumps(_BF16_JSON))
    sources.append(bf16)
    if with_torch:
        try:
            from burnside.examples.a1 import record_torch
        except ImportError:
            pass
        else:
            recorded = record_torch(workdir / "seed-torch.safetensors", steps=2, optim="adam")
            sources += [recorded, convert_trace(recorded, workdir / "seed-torch.json")]
    for path in sources:
        form = "json" if path.suffix == ".json" else "safetensors"
        if form == "safetensors":
            _canonical(path)
        seeds[form].append(Seed(form, path.read_bytes(), open_trace(path)))
    init = write_trace(workdir / "seed.init.safetensors",
                       {"params.fc.weight": np.ones((3, 4), np.float32), "inputs.y": np.arange(2, dtype=np.int64)},
                       {"params": ["fc.weight"], "inputs": ["y"], "framework": "pytorch"}, kind="init")
    _canonical(init)
    seeds["init"].append(Seed("init", init.read_bytes(), None))
    seeds["tolerances.toml"].append(Seed("tolerances.toml", _TOLERANCE_TOML.encode(), None))
    seeds["tolerances.json"].append(Seed("tolerances.json", _TOLERANCE_JSON.encode(), None))
    return seeds


def _canonical(path: Path) -> None:
    """Rewrite a safetensors header with sorted keys: the writer's map order varies from run to run,
    and a fixed seed must give the same mutants."""
    header, body = split_safetensors(path.read_bytes())
    path.write_bytes(join_safetensors(json.dumps(header, sort_keys=True).encode(), body))


# ---------------------------------------------------------------- the reference verdict


def _element_pass(a: np.ndarray, b: np.ndarray, dtype: str, tol: Tolerance) -> bool:
    """Every element of B within ``tol`` of A, decided independently of burnside.compare (exact arithmetic)."""
    if dtype not in ("F64", "F32", "F16", "BF16"):
        return bool(np.array_equal(a, b))
    bits = {"F64": np.uint64, "F32": np.uint32, "F16": np.uint16, "BF16": np.uint16}[dtype]
    ua, ub = a.reshape(-1).view(bits), b.reshape(-1).view(bits)
    with np.errstate(invalid="ignore"):
        va = (bf16_to_f32(a.reshape(-1)) if dtype == "BF16" else a.reshape(-1)).astype(np.float64)
        vb = (bf16_to_f32(b.reshape(-1)) if dtype == "BF16" else b.reshape(-1)).astype(np.float64)
    for i in np.flatnonzero(ua != ub).tolist():
        x, y = float(va[i]), float(vb[i])
        if math.isnan(x) and math.isnan(y):
            continue
        if not (math.isfinite(x) and math.isfinite(y)):
            return False
        if abs(Fraction(x) - Fraction(y)) <= Fraction(tol.atol) + Fraction(tol.rtol) * abs(Fraction(y)):
            continue
        if tol.ulps is not None and _ulps(int(ua[i]), int(ub[i]), bits) <= tol.ulps:
            continue
        return False
    return True


def _ulps(x: int, y: int, bits) -> int:
    width = np.dtype(bits).itemsize * 8
    sign = 1 << (width - 1)

    def ordered(v: int) -> int:
        return -(v & (sign - 1)) if v & sign else v

    return abs(ordered(x) - ordered(y))


def _identical(a: np.ndarray, b: np.ndarray, dtype: str) -> bool:
    if dtype not in ("F64", "F32", "F16", "BF16"):
        return bool(np.array_equal(a, b))
    bits = {"F64": np.uint64, "F32": np.uint32, "F16": np.uint16, "BF16": np.uint16}[dtype]
    ua, ub = a.reshape(-1).view(bits), b.reshape(-1).view(bits)
    va = bf16_to_f32(a.reshape(-1)) if dtype == "BF16" else a.reshape(-1)
    vb = bf16_to_f32(b.reshape(-1)) if dtype == "BF16" else b.reshape(-1)
    return bool(np.all((ua == ub) | (np.isnan(va) & np.isnan(vb))))


#: The stages whose NaN or infinity means a training run diverged (and proves nothing from there on).
_RUN_STAGES = ("logits", "loss", "grads", "params_after", "optim", "loss_after")


def _diverged(trace: Trace) -> bool:
    if trace.kind == "forward":
        return False
    for name in trace.names:
        parsed = parse_name(name)
        if parsed is None or parsed.stage not in _RUN_STAGES or trace.info(name).dtype not in ("F64", "F32", "F16"):
            continue
        if not np.all(np.isfinite(np.asarray(trace.array(name)))):
            return True
    return False


def reference_verdict(a: Trace, b: Trace, tolerances: Tolerances) -> bool:
    """Should `compare_with_evidence(a, b)` pass? Same names, dtypes and shapes, identical start, every element in
    tolerance, neither training run diverged (a NaN or an infinity), the same optimizer declared."""
    if set(a.names) != set(b.names):
        return False
    if _diverged(a) or _diverged(b):
        return False
    if optimizer_differences(a.optimizer, b.optimizer, a.params, b.params):
        return False
    for name in a.names:
        ia, ib = a.info(name), b.info(name)
        if ia != ib:
            return False
        x, y = np.asarray(a.array(name)), np.asarray(b.array(name))
        parsed = parse_name(name)
        if parsed is not None and parsed.is_shared_start and not _identical(x, y, ia.dtype):
            return False
        if not _element_pass(x, y, ia.dtype, tolerances.for_name(name)):
            return False
    return True


def _same_trace(a: Trace, b: Trace) -> str | None:
    """Why two traces differ in any bit (None when they do not): the check of a conversion."""
    if a.names != b.names:
        return "names differ"
    if a.metadata != b.metadata:
        return "metadata differ"
    for name in a.names:
        if a.info(name) != b.info(name):
            return f"{name}: dtype/shape differ"
        if np.asarray(a.array(name)).tobytes() != np.asarray(b.array(name)).tobytes():
            return f"{name}: bits differ"
    return None


# ---------------------------------------------------------------- running cases


_SILENT = Console(file=io.StringIO(), width=120)


def _check_trace(path: Path, seed: Seed, workdir: Path) -> str | None:
    """Run a trace mutant through every reader and the whole compare path; a complaint, or None."""
    trace = open_trace(path)
    tolerances = Tolerances()
    assert seed.trace is not None
    for a, b in ((seed.trace, trace), (trace, seed.trace)):
        try:
            comparison = compare_with_evidence(a, b, tolerances)
        except BurnsideError:
            if set(a.names) & set(b.names):
                return "compare refused two traces that share tensors"
            continue
        diagnoses = diagnose(comparison)
        comparison_json(comparison, diagnoses)
        render(comparison, diagnoses, _SILENT)
        expected = reference_verdict(a, b, tolerances)
        if comparison.passed != expected:
            return f"compare says passed={comparison.passed}, the exact reference says {expected}"
    other = workdir / ("back.safetensors" if path.suffix == ".json" else "back.json")
    has_bf16 = any(trace.info(n).dtype == "BF16" for n in trace.names)
    if has_bf16 and other.suffix == ".safetensors":
        return None
    try:
        convert_trace(path, other)
    except BurnsideError as exc:
        return f"convert refused a trace it read: {exc}"
    why = _same_trace(trace, open_trace(other))
    return f"convert changed the trace: {why}" if why else None


def _check_init(path: Path) -> str | None:
    init = open_trace(path, kind="init")
    for name in init.names:
        np.asarray(init.array(name)).sum()
    return None


_PERTURBED: dict[str, tuple[Trace, Trace]] = {}


def _check_tolerances(path: Path, seeds: dict[str, list[Seed]], workdir: Path) -> str | None:
    tolerances = load_tolerances(path, Tolerance())
    for _, tol in ((None, tolerances.default), *tolerances.overrides):
        ok = (isinstance(tol.atol, (int, float)) and math.isfinite(tol.atol) and tol.atol >= 0
              and isinstance(tol.rtol, (int, float)) and math.isfinite(tol.rtol) and tol.rtol >= 0
              and (tol.ulps is None or (type(tol.ulps) is int and tol.ulps >= 0)))
        if not ok:
            return f"accepted an invalid tolerance {tol}"
    a, b = _perturbed_pair(seeds, workdir)
    comparison = compare_with_evidence(a, b, tolerances)
    diagnose(comparison)
    expected = reference_verdict(a, b, tolerances)
    if comparison.passed != expected:
        return f"with {tolerances}: compare says passed={comparison.passed}, the exact reference says {expected}"
    return None


def _perturbed_pair(seeds: dict[str, list[Seed]], workdir: Path) -> tuple[Trace, Trace]:
    """The 2-step Adam seed and a copy whose outputs differ by 1 ulp, 1e-7, 1e-3 and one NaN."""
    if "pair" not in _PERTURBED:
        base = seeds["safetensors"][1].trace
        assert base is not None
        tensors = {n: np.array(base.array(n)) for n in base.names}
        for i, name in enumerate(n for n in base.names if ".grads." in n or ".logits" in n or ".optim." in n):
            t = tensors[name].reshape(-1)
            t[0] = [np.nextafter(t[0], np.float32(np.inf)), t[0] + np.float32(1e-7), t[0] + np.float32(1e-3),
                    np.float32(np.nan)][i % 4]
        b = write_trace(workdir / "perturbed.safetensors", tensors, base.metadata)
        _PERTURBED["pair"] = (base, open_trace(b))
    return _PERTURBED["pair"]


def _site(exc: BaseException) -> str:
    """The innermost frame in burnside's package (wherever it is installed, whatever its checkout's folder is
    called), as ``burnside/trace/json_file.py:88 (function)``; the innermost frame of all if none is."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(_PACKAGE)] or frames
    f = ours[-1]
    path = Path(f.filename).resolve()
    where = path.relative_to(_PACKAGE.parent).as_posix() if path.is_relative_to(_PACKAGE) else f.filename
    return f"{where}:{f.lineno} ({f.name})"


def fuzz(count: int, seed: int = 0, forms: tuple[str, ...] = FORMS, timeout: float = 10.0,
         workdir: Path | None = None, crash_dir: Path | None = None, with_torch: bool = True,
         progress: Callable[[str, int], None] | None = None) -> Report:
    """Run ``count`` mutants of each form in ``forms`` with a fixed ``seed``; returns the figures."""
    own = tempfile.TemporaryDirectory(prefix="burnside-fuzz-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    workdir = workdir or Path(own.name)
    _PERTURBED.clear()
    seeds = make_seeds(workdir, with_torch)
    report = Report()
    rng = random.Random(seed)

    def on_alarm(signum, frame):
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        for form in forms:
            counts = report.counts[form]
            suffix = {"safetensors": ".safetensors", "json": ".json", "init": ".safetensors",
                      "tolerances.toml": ".toml", "tolerances.json": ".json"}[form]
            for i in range(count):
                if progress is not None and i and i % 1000 == 0:
                    progress(form, i)
                seed_file = rng.choice(seeds[form])
                data, mutation = mutate(rng, form, seed_file, seeds[form])
                name = "mutant" + (suffix if form.startswith("tolerances") or rng.random() < 0.9 else ".trace")
                path = workdir / name
                path.write_bytes(data)
                counts.mutants += 1
                counts.mutations[mutation.split("+")[0]] += 1
                signal.setitimer(signal.ITIMER_REAL, timeout)
                try:
                    if form in ("safetensors", "json"):
                        complaint = _check_trace(path, seed_file, workdir)
                    elif form == "init":
                        complaint = _check_init(path)
                    else:
                        complaint = _check_tolerances(path, seeds, workdir)
                except BurnsideError:
                    counts.rejected += 1
                    continue
                except _Hang:
                    counts.hangs += 1
                    report.hangs.append((form, mutation, _keep(crash_dir, form, "hang", i, data, suffix)))
                    continue
                except Exception as exc:  # noqa: BLE001 - a crash is what the fuzzer looks for
                    counts.crashes += 1
                    key = (type(exc).__name__, _site(exc))
                    if key not in report.crashes:
                        report.crashes[key] = Crash(form, mutation, f"{type(exc).__name__}: {str(exc)[:200]}",
                                                    key[1], _keep(crash_dir, form, "crash", i, data, suffix))
                    continue
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if complaint:
                    counts.wrong += 1
                    report.wrong.append((form, mutation, complaint, _keep(crash_dir, form, "wrong", i, data, suffix)))
                else:
                    counts.accepted += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
        own.cleanup()
    return report


def _keep(crash_dir: Path | None, form: str, what: str, i: int, data: bytes, suffix: str) -> Path | None:
    if crash_dir is None:
        return None
    crash_dir.mkdir(parents=True, exist_ok=True)
    path = crash_dir / f"{form}-{what}-{i}{suffix}"
    path.write_bytes(data)
    return path

"""Run conformance cases: record PyTorch's side and its float64 reference, run burn's side, compare them as
a user's port is compared, and test the case's hypotheses against the numbers.

A case's verdict (`CaseResult.verdict`):

- ``same``: every tensor within tolerance or within rounding of the float64 run on both sides, no diagnosis
  (``detail``: ``bit-identical`` or ``rounding``);
- ``framework``: burn computes something else, and the cause is known: a difference the float64 referee
  already models (a `burnside.reference` variant) or a hypothesis of the case the numbers confirm;
- ``default``: burn's default for a setting the case leaves at its default differs (a confirmed hypothesis of
  kind ``default``), with the fix;
- ``difference``: burn is off and no hypothesis explains it (the first diverging tensor and burnside's
  diagnoses say where);
- ``not comparable``: the twin cannot be compared, and why (burn has no such option, its side failed).
"""

from __future__ import annotations

import copy
import fnmatch
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from burnside.compare import Comparison
from burnside.compare.referee import max_abs, max_distance, verdict
from burnside.conformance.case import MODULE_LR, Case, Harness, Hypothesis, perturbed, probe_sum
from burnside.errors import BurnsideError
from burnside.trace import open_trace

#: The stages a case's verdict is judged on (the start is bit-identical by construction).
_JUDGED = ("layer_inputs", "activations", "logits", "loss", "loss_inputs", "grads", "params_after", "buffers",
           "optim", "loss_after")


@dataclass
class CaseResult:
    """What one case came to."""

    case: Case
    verdict: str  # same | framework | default | difference | not comparable
    detail: str  # bit-identical / rounding / the cause / why not comparable
    fix: str = ""
    rel_torch: float | None = None  # worst relative error of PyTorch's float32 run against the float64 run
    rel_burn: float | None = None  # and of burn's
    first: str | None = None  # the first tensor burn is off at
    diagnoses: list[str] = field(default_factory=list)  # burnside's diagnoses of the difference ("D011 ...")
    seconds: float = 0.0

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"id": self.case.id, "title": self.case.title, "kind": self.case.kind, "verdict": self.verdict,
                "detail": self.detail, "fix": self.fix, "rel_torch": _finite(self.rel_torch),
                "rel_burn": _finite(self.rel_burn), "first": self.first, "diagnoses": self.diagnoses,
                "seconds": round(self.seconds, 3)}


def _finite(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else "inf"


def select(cases: Sequence[Case], only: Sequence[str] = (), ci: bool = False) -> list[Case]:
    """The cases whose id matches one of the ``only`` globs (all when none), the CI subset with ``ci``."""
    from burnside.catalogue import CATALOGUE

    catalogued = {k.case for k in CATALOGUE}  # the CI subset re-measures every catalogued difference
    chosen = [c for c in cases if (not only or any(fnmatch.fnmatchcase(c.id, g) for g in only))
              and (not ci or c.ci or c.id in catalogued)]
    if not chosen:
        raise BurnsideError(f"no conformance case matches {' '.join(only) or 'the CI subset'}; "
                            "`burnside conformance --list` lists them")
    return chosen


def build(case: Case, seed: int = 0) -> tuple[Harness, dict[str, torch.Tensor]]:
    """The case's PyTorch harness and batch, the same numbers every time (everything drawn from ``seed``)."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    layer = case.layer()
    if layer is not None:
        perturbed(layer, generator)
    x = None if case.x is None else torch.randn(case.x, generator=generator) * case.x_scale
    batch = case.batch(generator) if case.batch is not None else {}
    harness = Harness(case, layer, x)
    if case.loss is None:
        with torch.no_grad():  # on a copy: a training-mode pass updates running statistics, renormalises rows
            out = copy.deepcopy(harness)(batch)
        batch["probe"] = torch.randn(out.shape, generator=generator)
    return harness, batch


def _optimizer(case: Case, harness: nn.Module) -> torch.optim.Optimizer:
    params = list(harness.parameters())
    if case.optimizer is not None:
        return case.optimizer(params)
    return torch.optim.SGD(params, lr=MODULE_LR)


def _loop(case: Case) -> dict:
    return {"steps": case.steps, "loss_fn": case.loss or probe_sum, "forward": lambda m, b: m(b), "target": None,
            "metadata": {"loss_fn": case.loss_name, "conformance_case": case.id}}


def record_torch(case: Case, directory: Path) -> tuple[Path, Path]:
    """PyTorch's trace and its float64 reference (with the variants of burn's known arithmetic it meets)."""
    from burnside.torch import record

    harness, batch = build(case)
    torch_trace, reference = directory / "torch.safetensors", directory / "reference.safetensors"
    record(harness, _optimizer(case, harness), batch, torch_trace, reference=reference, **_loop(case))
    return torch_trace, reference


def record_hypothesis(case: Case, hypothesis: Hypothesis, path: Path) -> Path:
    """The case's float64 run with the hypothesis' change made to its layer."""
    from burnside.recording.reference import record_reference

    harness, batch = build(case)
    if hypothesis.change is not None:
        harness.layer = hypothesis.change(getattr(harness, "layer", None))  # a fresh harness: changed in place
    optimizer = (hypothesis.optimizer(list(harness.parameters())) if hypothesis.optimizer is not None
                 else _optimizer(case, harness))
    loop = _loop(case)
    if hypothesis.loss is not None:
        loop["loss_fn"] = hypothesis.loss
    record_reference(harness, optimizer, batch, path, variants=False, layer_inputs=True, **loop)
    return path


def confirms(torch_trace: Path, reference: Path, burn_trace: Path, hypothesis_trace: Path) -> bool:
    """True when burn's trace is as close to the hypothesis' float64 run as PyTorch's is to its own, at every
    judged tensor all four hold (and the hypothesis computes something else than PyTorch somewhere)."""
    a, r, b, h = (open_trace(p) for p in (torch_trace, reference, burn_trace, hypothesis_trace))
    apart = False
    judged = 0
    for name in b.names:
        stage = name.split(".")[1] if name.startswith("step") and "." in name else name
        if stage not in _JUDGED or any(name not in t for t in (a, r, h)):
            continue
        xb, xh, xa, xr = b.array(name), h.array(name), a.array(name), r.array(name)
        if xb.dtype.kind != "f" or xb.shape != xh.shape or xa.shape != xr.shape:
            continue
        scale = max_abs(xh)
        judged += 1
        if verdict(max_distance(xa, xr), max_distance(xb, xh), scale) == "b":
            return False
        apart = apart or verdict(0.0, max_distance(xr, xh), max(scale, max_abs(xr))) == "b"
    return judged > 0 and apart


def worst_relative(comparison: Comparison) -> tuple[float | None, float | None]:
    """The worst distance to the float64 run relative to the tensor's scale, on each side (judged stages)."""
    worst = {"a": None, "b": None}
    for row in comparison.rows:
        if row.ref is None or row.stage not in _JUDGED or row.ref.scale == 0:
            continue
        for side, dist in (("a", row.ref.dist_a), ("b", row.ref.dist_b)):
            rel = dist / row.ref.scale
            if worst[side] is None or not (rel <= worst[side]):  # NaN wins
                worst[side] = rel
    return worst["a"], worst["b"]


def _bit_identical(comparison: Comparison) -> bool:
    return all(row.stats.max_abs == 0 for row in comparison.rows if row.stage in _JUDGED)


def _first_off(comparison: Comparison, side: str = "b") -> str | None:
    """The first judged tensor where ``side`` is off its float64 reference (for burn: else the first divergence)."""
    for row in comparison.rows:
        if row.stage in _JUDGED and row.ref is not None and row.ref.verdict == side:
            return row.name
    first = comparison.first_divergence
    return first.name if first is not None and side == "b" else None


def _random(case: Case, burn, init: Path, trace: Path, first: str | None, again: Path) -> bool:
    """True when a second run of burn's side from the same init file differs from the first at ``first`` (the
    tensor burn is off at): its forward draws random numbers."""
    if first is None:
        return False
    burn(case, init, again)
    a, b = open_trace(trace), open_trace(again)
    return first in a and first in b and not np.array_equal(a.array(first), b.array(first))


def _relative_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def run_case(case: Case, directory: Path, burn: Callable[[Case, Path, Path], Path]) -> CaseResult:
    """Run one case in ``directory``; ``burn(case, init, out)`` runs its burn side (the built program)."""
    from burnside.burn.port import init_from_trace
    from burnside.compare import open_reference
    from burnside.diagnose import diagnose
    from burnside.pipeline import compare_with_evidence

    started = time.perf_counter()
    if case.not_comparable:
        return CaseResult(case, "not comparable", case.not_comparable)
    directory.mkdir(parents=True, exist_ok=True)
    torch_trace, reference = record_torch(case, directory)
    init = init_from_trace(open_trace(torch_trace), directory / "init.safetensors")
    burn_trace = directory / "burn.safetensors"
    burn_trace.unlink(missing_ok=True)
    try:
        burn(case, init, burn_trace)
    except BurnsideError as error:
        for hypothesis in case.hypotheses:
            if hypothesis.failure and hypothesis.failure in str(error):
                return CaseResult(case, hypothesis.kind, hypothesis.cause, hypothesis.fix,
                                  first=f"burn's side failed: {error}", seconds=time.perf_counter() - started)
        return CaseResult(case, "not comparable", f"burn's side failed: {error}",
                          seconds=time.perf_counter() - started)
    comparison = compare_with_evidence(torch_trace, burn_trace, reference=open_reference(reference))
    diagnoses = diagnose(comparison)
    named = [f"{d.rule} {d.title}" for d in diagnoses]
    rel_a, rel_b = worst_relative(comparison)
    result = CaseResult(case, "same", "", rel_torch=rel_a, rel_burn=rel_b, diagnoses=named)
    ours = [d for d in comparison.framework_differences if d.side == "b"]
    structure = [f"{p.name} {p.what} {p.a} vs {p.b}" for p in comparison.structure]
    structure += [f"{n} only in PyTorch's" for n in comparison.only_in_a]
    structure += [f"{n} only in burn's" for n in comparison.only_in_b]
    if comparison.passed and not diagnoses and not structure:
        result.detail = "bit-identical" if _bit_identical(comparison) else "rounding"
        if ours:
            result.verdict = "framework"
            result.detail = f"{ours[0].title} (catalogued: burnside's referee models it)"
    else:
        result.first = _first_off(comparison)
        for i, hypothesis in enumerate(case.hypotheses):
            if hypothesis.failure:
                continue  # confirmed only by burn's side failing
            if hypothesis.random:
                confirmed = _random(case, burn, init, burn_trace, result.first, directory / "burn.again.safetensors")
            elif hypothesis.rule:
                confirmed = any(d.rule == hypothesis.rule for d in diagnoses)
            else:
                path = record_hypothesis(case, hypothesis, directory / f"hypothesis{i}.safetensors")
                confirmed = confirms(torch_trace, reference, burn_trace, path)
            if confirmed:
                result.verdict, result.detail, result.fix = hypothesis.kind, hypothesis.cause, hypothesis.fix
                break
        else:
            torch_off = _first_off(comparison, "a")
            if structure:  # a tensor one side has and the other has not (state burn keeps): nothing to judge it by
                result.verdict = "not comparable"
                result.detail = "the traces differ in structure: " + "; ".join(structure[:3])
            elif not any(r.ref is not None and r.ref.verdict == "b" for r in comparison.rows) and torch_off:
                # burn within rounding of the float64 run everywhere, PyTorch's float32 run off it somewhere
                result.verdict, result.first = "framework", torch_off
                result.detail = (f"PyTorch's float32 run is off the float64 run (first at {torch_off}, worst "
                                 f"{_relative_text(result.rel_torch)}) where burn's is within rounding: PyTorch's own "
                                 "arithmetic")
            else:
                result.verdict = "difference"
                result.detail = "; ".join(named) or "out of tolerance, no diagnosis"
    result.seconds = time.perf_counter() - started
    return result


def burn_runner(console=None, program: Path | None = None) -> Callable[[Case, Path, Path], Path]:
    """Build burnside's programs once (or take ``program``, a conformance binary built by hand) and run
    ``conformance --case ID`` for each case."""
    from burnside.burn.binary import run_binary
    from burnside.burn.programs import built_programs

    program = program or built_programs(console).executables["conformance"]

    def run(case: Case, init: Path, out: Path) -> Path:
        run_binary(program, ["--case", case.id, "--init", str(init), "-o", str(out), "--steps", str(case.steps)],
                   expect_file=out)
        return out

    return run


def burn_case_ids(console=None) -> list[str]:
    """The ids the burn program implements (`conformance --list`)."""
    import subprocess

    from burnside.burn.programs import built_programs

    program = built_programs(console).executables["conformance"]
    return subprocess.run([str(program), "--list"], capture_output=True, text=True, check=True).stdout.split()


def run_suite(cases: Sequence[Case], out_dir: Path, *, console=None,
              progress: Callable[[int, int, str], None] | None = None, program: Path | None = None) -> list[CaseResult]:
    """Run ``cases`` (each in ``out_dir/<id>``), telling ``progress(done, total, id)`` as it goes."""
    burn = burn_runner(console, program)
    results = []
    for i, case in enumerate(cases):
        if progress is not None:
            progress(i, len(cases), case.id)
        results.append(run_case(case, out_dir / case.id.replace("/", "__"), burn))
    if progress is not None:
        progress(len(cases), len(cases), "")
    return results


def summary(results: Sequence[CaseResult]) -> dict[str, int]:
    """How many cases came to each verdict."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return counts


__all__ = ["CaseResult", "build", "confirms", "run_case", "run_suite", "select", "summary"]

"""`compare_traces`: a pure function from two traces and tolerances to a `Comparison`."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from burnside.compare.layers import LayerForensics, measure_layer
from burnside.compare.reference import (
    FrameworkDifference,
    Judge,
    Reference,
    RefStats,
    ZeroGradient,
    check_start,
)
from burnside.compare.summary import TraceSummary, summarize
from burnside.compare.tensor_diff import ElementStats, diff_arrays
from burnside.compare.tolerance import Tolerance, Tolerances
from burnside.errors import TraceError
from burnside.trace import TensorInfo, Trace, parse_name
from burnside.trace.dtypes import STORAGE
from burnside.trace.init_batches import same_bits

if TYPE_CHECKING:
    from burnside.progress import TensorProgress


@dataclass(frozen=True)
class TensorRow:
    """One tensor compared on both sides."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stats: ElementStats
    tol: Tolerance
    ref: RefStats | None = None  # both sides' distances to the float64 reference, when given

    @property
    def passed(self) -> bool:
        """Every element within tolerance, or (with a reference) both sides within rounding of it."""
        return self.stats.out_of_tol == 0 or (self.ref is not None and self.ref.noise)

    @property
    def stage(self) -> str | None:
        """The pipeline stage of this tensor (None for names outside the v1 grammar)."""
        parsed = parse_name(self.name)
        return parsed.stage if parsed else None

    @property
    def worst_index(self) -> tuple[int, ...] | None:
        """Multi-dimensional index of the worst element."""
        if self.stats.worst_index is None:
            return None
        if not self.shape:
            return ()
        return tuple(int(i) for i in np.unravel_index(self.stats.worst_index, self.shape))


@dataclass(frozen=True)
class StructureProblem:
    """A tensor present on both sides whose shape or dtype differs."""

    name: str
    what: str  # "shape" or "dtype"
    a: str
    b: str
    transposed: bool = False  # a 2-D shape that is the other side's transpose (D007)

    @property
    def hint(self) -> str | None:
        """What a transposed shape means, for the report."""
        if not self.transposed:
            return None
        return ("the shapes are transposes: one side stored a Linear weight in burn's [in, out] layout; "
                "the burn recorder must write PyTorch's [out, in]")


@dataclass(frozen=True)
class RepeatedBatch:
    """One side trained on step 0's batch again at steps where the other fed a different batch.

    The usual cause is a port that reads the init file's first batch once, before its loop,
    while the PyTorch loop drew a batch per step (a data loader, a replay buffer).
    """

    side: str  # "a" or "b": the side that repeated step 0's batch
    steps: tuple[int, ...]


@dataclass
class Comparison:
    """The result of comparing trace A (usually PyTorch) with trace B (usually burn).

    It holds summaries of the two traces, not the traces: everything the diagnosis and the
    report need was read in compare's one pass.
    """

    a: TraceSummary
    b: TraceSummary
    tolerances: Tolerances
    rows: list[TensorRow]
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    #: optional tensors one side recorded and the other did not (layer outputs a port does not
    #: tap, PyTorch's `num_batches_tracked` that burn does not keep): listed, never a failure
    unrecorded_in_a: list[str] = field(default_factory=list)
    unrecorded_in_b: list[str] = field(default_factory=list)
    structure: list[StructureProblem] = field(default_factory=list)
    reference: Path | None = None  # the float64 reference both sides were judged by
    framework_differences: list[FrameworkDifference] = field(default_factory=list)
    #: parameters with elements whose gradient is zero up to rounding (judged from the reference)
    zero_gradients: list[ZeroGradient] = field(default_factory=list)
    #: the settings of the layer at the first divergence, measured on each side (BatchNorm, LayerNorm, GELU)
    layer: LayerForensics | None = None
    #: one side fed step 0's batch again where the other fed another (D006 says which steps)
    repeated_batch: RepeatedBatch | None = None

    def side_name(self, side: str) -> str:
        """`B (burn)` for "b"."""
        return f"{side.upper()} ({(self.a if side == 'a' else self.b).framework})"

    @property
    def steps(self) -> int:
        """Steps covered (the larger of the two traces)."""
        return max(self.a.steps, self.b.steps, 1)

    @property
    def start_mismatch(self) -> list[TensorRow]:
        """Inputs / initial params that are not bit-identical: outputs then measure that difference too."""
        return [r for r in self.rows if not r.stats.identical and _is_shared_start(r.name)]

    @property
    def failed_rows(self) -> list[TensorRow]:
        """Rows with elements out of tolerance."""
        return [r for r in self.rows if not r.passed]

    @property
    def first_divergence(self) -> TensorRow | None:
        """The earliest tensor in pipeline order that is out of tolerance: usually the cause of the rest."""
        return next((r for r in self.rows if not r.passed), None)

    @property
    def worst(self) -> float:
        """Largest absolute difference over all rows."""
        return max((r.stats.max_abs for r in self.rows), default=0.0)

    @property
    def passed(self) -> bool:
        """Same structure, bit-identical start, every element within tolerance."""
        return not (self.failed_rows or self.only_in_a or self.only_in_b or self.structure or self.start_mismatch)

    def tolerances_used(self) -> list[tuple[str | None, Tolerance]]:
        """The default tolerance, then each override that applied to a compared row (glob, tolerance)."""
        used = [(None, self.tolerances.default)]
        for pattern, tol in self.tolerances.overrides:
            if any(self.tolerances.for_name(r.name) is tol for r in self.rows):
                used.append((pattern, tol))
        return used

    def layer_of(self, row: TensorRow) -> tuple[str | None, TensorRow | None]:
        """For an activation row: the module's class (A's metadata `modules`) and the activation
        before it in the same step's execution order (the layer's input, as far as recorded)."""
        parsed = parse_name(row.name)
        if parsed is None or parsed.stage != "activations":
            return None, None
        modules = self.a.metadata.get("modules")
        module = parsed.rest.split("#", 1)[0]
        kind = modules.get(module) if isinstance(modules, dict) and isinstance(modules.get(module), str) else None
        before = None
        for other in self.rows:
            if other is row:
                break
            other_parsed = parse_name(other.name)
            if other_parsed and other_parsed.stage == "activations" and other_parsed.step == parsed.step:
                before = other
        return kind, before

    def drift_before(self, step: int) -> float:
        """The largest |A - B| of step ``step``'s parameters before its update: 0 when the two sides start
        the step from bit-identical parameters (step 0 of a port loaded from the PyTorch init), above 0 once
        rounding (or a bug) has moved them apart."""
        worst = 0.0
        for row in self.rows:
            parsed = parse_name(row.name)
            if parsed is not None and parsed.step == step and parsed.stage == "params_before":
                worst = max(worst, row.stats.max_abs)
        return worst

    def display_name(self, name: str) -> str:
        """Drop `step0.` when both traces hold a single step, so A1's table reads like the seed's."""
        if self.steps == 1 and name.startswith("step0."):
            return name[len("step0."):]
        return name


def is_optional(name: str) -> bool:
    """A tensor a trace may hold without the other: a layer's output, or a buffer burn does not keep."""
    parsed = parse_name(name)
    if parsed is None:
        return False
    return parsed.stage == "activations" or (parsed.stage == "buffers"
                                             and parsed.rest.rsplit(".", 1)[-1] == "num_batches_tracked")


def _nbytes(info: TensorInfo) -> int:
    return info.n * STORAGE[info.dtype].itemsize


def _is_shared_start(name: str) -> bool:
    parsed = parse_name(name)
    return parsed is not None and parsed.is_shared_start


def _check_steps(a: Trace, b: Trace, one_sided: list[str]) -> None:
    """Raise TraceError when the traces hold different numbers of steps and the comparison would
    list the longer one's extra steps tensor by tensor (traces of two different runs, not a bug)."""
    steps_a = {p.step for n in a.names if (p := parse_name(n)) is not None}
    steps_b = {p.step for n in b.names if (p := parse_name(n)) is not None}
    if not steps_a or not steps_b or steps_a == steps_b:
        return
    shared = steps_a & steps_b
    extra = [n for n in one_sided if (p := parse_name(n)) is not None and p.step not in shared]
    if not extra:
        return  # --only picked shared steps
    if not shared:
        raise TraceError(f"{a.path} and {b.path} hold no step in common: are they traces of the same run?")
    more, fewer = ("A", "B") if len(steps_a) > len(steps_b) else ("B", "A")
    n_more, n_fewer = max(len(steps_a), len(steps_b)), min(len(steps_a), len(steps_b))
    raise TraceError(f"{more} recorded {n_more} steps and {fewer} {n_fewer}: record both sides for the same number of "
                     f"steps (with `burnside check`, arguments after `--` go to the port: `-- --steps {n_more}`), or "
                     f"compare one step both hold with --only 'step{min(shared)}.*'")


def compare_traces(a: Trace, b: Trace, tolerances: Tolerances | None = None, only: str | None = None,
                   reference: Reference | None = None, progress: TensorProgress | None = None) -> Comparison:
    """Compare every tensor the two traces share, one at a time, in pipeline order.

    With a ``reference`` (`burnside.compare.open_reference`), each tensor is also judged by both
    sides' distances to it: a tensor out of tolerance passes when both sides are noise.
    Never transposes: a shape that is the other's transpose is a structure problem with a hint.
    Raises TraceError when the traces share no tensor at all (not traces of the same run).
    ``progress`` is told the tensors and bytes done before each tensor and at the end
    (`burnside.progress.Progress.tensors` draws it).
    """
    tolerances = tolerances or Tolerances()
    for side, trace in (("A", a), ("B", b)):
        refuse_reference(trace, f"a side to compare ({side})",
                         "pass it as --reference and give A and B the two sides' traces")
    names_a, names_b = set(a.names), set(b.names)

    def selected(name: str) -> bool:
        # `--only grads.*` matches single-step names as the table prints them, without `step0.`
        return only is None or fnmatch.fnmatchcase(name, only) or fnmatch.fnmatchcase(name.removeprefix("step0."), only)

    common = [n for n in a.names if n in names_b and selected(n)]
    if not common and names_a & names_b == set():
        raise TraceError(f"{a.path} and {b.path} share no tensor names; are they traces of the same model "
                         "(see docs/trace-format.md for the names)?")
    if not common:
        raise TraceError(f"--only {only!r} matches no tensor present in both traces")
    _check_steps(a, b, [n for n in (names_a ^ names_b) if selected(n)])
    if reference is not None:
        check_start(a, reference)
    missing_in_b = [n for n in a.names if n not in names_b and selected(n)]
    missing_in_a = [n for n in b.names if n not in names_a and selected(n)]
    comparison = Comparison(
        a=summarize(a),
        b=summarize(b),
        tolerances=tolerances,
        rows=[],
        only_in_a=[n for n in missing_in_b if not is_optional(n)],
        only_in_b=[n for n in missing_in_a if not is_optional(n)],
        unrecorded_in_a=[n for n in missing_in_a if is_optional(n)],
        unrecorded_in_b=[n for n in missing_in_b if is_optional(n)],
    )
    adaptive = any(side.optimizer.get("name") in ("adam", "adamw") for side in (a, b)
                   if isinstance(side.optimizer, dict))
    judge = Judge(reference, adaptive=adaptive) if reference is not None else None
    if reference is not None:
        comparison.reference = reference.path
    if progress is not None:
        sizes = [_nbytes(a.info(n)) + _nbytes(b.info(n)) for n in common]
        done, total = 0, sum(sizes)
    for i, name in enumerate(common):
        if progress is not None:
            progress(i, len(common), done, total)
            done += sizes[i]
        ia, ib = a.info(name), b.info(name)
        if ia.shape != ib.shape:
            transposed = len(ia.shape) == 2 and ia.shape == ib.shape[::-1]
            comparison.structure.append(
                StructureProblem(name, "shape", str(list(ia.shape)), str(list(ib.shape)), transposed))
            continue
        if ia.dtype != ib.dtype:
            comparison.structure.append(StructureProblem(name, "dtype", ia.dtype, ib.dtype))
            continue
        tol = tolerances.for_name(name)
        stats = diff_arrays(a.array(name), b.array(name), ia.dtype, tol)
        ref = None
        if judge is not None and ia.dtype in ("F32", "F64", "F16"):
            parsed = parse_name(name)
            ref = judge.judge(name, parsed.stage if parsed else None, a.array(name), b.array(name),
                              step=parsed.step if parsed else 0, param=parsed.param if parsed else None)
        a.release(name)
        b.release(name)
        comparison.rows.append(TensorRow(name, ia.dtype, ia.shape, stats, tol, ref))
    if progress is not None:
        progress(len(common), len(common), total, total)
    if judge is not None:
        comparison.framework_differences = judge.differences
        comparison.zero_gradients = list(judge.zero_gradients.values())
    comparison.repeated_batch = _repeated_batch(a, b, comparison.start_mismatch)
    first = comparison.first_divergence
    if first is not None:
        # one layer at one step, while the traces are still open (the rules see only the summaries)
        comparison.layer = measure_layer(a, b, first.name)
    return comparison


def refuse_reference(trace: Trace, role: str, fix: str) -> None:
    """Raise TraceError when ``trace`` is a float64 reference given where ``role`` belongs.

    A reference (`burnside.reference.record_reference`, metadata `reference = float64`) is a
    trace in the same format, so it opens as one; as a side it would hand a port float64
    weights or be compared as if a framework had computed it.
    """
    if trace.metadata.get("reference") == "float64":
        raise TraceError(f"{trace.path} is a float64 reference (burnside.reference.record_reference), "
                         f"not {role}: {fix}")


def _repeated_batch(a: Trace, b: Trace, mismatched: list[TensorRow]) -> RepeatedBatch | None:
    """The side that fed step 0's batch again at the steps whose inputs differ, if one side did."""
    steps = sorted({p.step for p in (parse_name(r.name) for r in mismatched)
                    if p is not None and p.stage == "inputs" and p.step > 0})
    if not steps:
        return None
    def inputs(trace: Trace) -> dict[int, list[str]]:
        by_step: dict[int, list[str]] = {}
        for n in trace.names:
            parsed = parse_name(n)
            if parsed is not None and parsed.stage == "inputs":
                by_step.setdefault(parsed.step, []).append(n)
        return by_step

    by_trace = {id(a): inputs(a), id(b): inputs(b)}

    def reuses_first(trace: Trace, step: int) -> bool:
        present = by_trace[id(trace)]
        names, firsts = present.get(step, []), set(present.get(0, []))
        pairs = [(n, "step0." + n.split(".", 1)[1]) for n in names]
        return bool(pairs) and all(first in firsts and _bits_equal(trace, n, first) for n, first in pairs)

    for side, own, other in (("b", b, a), ("a", a, b)):
        repeated = tuple(k for k in steps if reuses_first(own, k) and not reuses_first(other, k))
        if repeated:
            return RepeatedBatch(side, repeated)
    return None


def _bits_equal(trace: Trace, name: str, other: str) -> bool:
    try:
        return same_bits(np.asarray(trace.array(name)), np.asarray(trace.array(other)))
    finally:
        trace.release(name)
        trace.release(other)

"""`compare_traces`: every tensor two traces share, compared once, in pipeline order, into a `Comparison`.

Compares and, given a float64 reference, judges each tensor by it; nothing else. The reference is
trusted as given: `burnside.parity` refuses one given as a side and checks it starts where the
PyTorch trace does, once, before anything is built. A later stage that reads the same traces
(`burnside.forensics`) is told through a `Collector`.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from burnside.compare.collector import Collector
from burnside.compare.comparison import Comparison, StructureProblem, TensorRow, is_optional
from burnside.compare.reference_file import Reference
from burnside.compare.referee import Judge
from burnside.compare.summary import summarize
from burnside.compare.tensor_diff import diff_arrays
from burnside.compare.tolerance import Tolerances
from burnside.errors import TraceError
from burnside.trace import TensorInfo, Trace, parse_name
from burnside.trace.dtypes import STORAGE

if TYPE_CHECKING:
    from burnside.progress import TensorProgress


def _nbytes(info: TensorInfo) -> int:
    return info.n * STORAGE[info.dtype].itemsize


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
                   reference: Reference | None = None, progress: TensorProgress | None = None,
                   collector: Collector | None = None) -> Comparison:
    """Compare every tensor the two traces share, one at a time, in pipeline order.

    With a ``reference`` (`burnside.compare.open_reference`), each tensor is also judged by both
    sides' distances to it: a tensor out of tolerance passes when both sides are noise. The
    reference is trusted: `burnside.parity.compare_with_evidence` (and `record_and_compare`) refuse one
    given as a side and check it starts where A does (`start_checks`) before calling this.
    Never transposes: a shape that is the other's transpose is a structure problem with a hint.
    Raises TraceError when the traces share no tensor at all (not traces of the same run).
    ``progress`` is told the tensors and bytes done before each tensor and at the end
    (`burnside.progress.Progress.tensors` draws it). ``collector`` is told the open traces before the
    first tensor and, with the comparison, after the last (`burnside.forensics.Forensics`).
    """
    tolerances = tolerances or Tolerances()
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
    if collector is not None:
        collector.start(a, b)
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
        comparison.zero_gradients = list(judge.zero_gradients.found.values())
    if collector is not None:
        collector.finish(a, b, comparison)  # while the traces are still open
    return comparison

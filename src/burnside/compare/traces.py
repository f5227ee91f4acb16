"""`compare_traces`: every tensor two traces share, compared once, in pipeline order, into a `Comparison`.

Compares and, given a float64 reference, judges each tensor by it; nothing else: the verdict is a function
of the two traces, the tolerances and the reference. The reference is trusted as given: `burnside.pipeline`
refuses one given as a side and checks it starts where the PyTorch trace does, once, before anything is built.
A later stage that reads the same traces (`burnside.forensics`) is told through an `Observer`; it changes
nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from burnside.compare.aligned import align
from burnside.optimizers.settings import optimizer_differences
from burnside.compare.comparison import Comparison
from burnside.compare.loading import (
    LoadingFault,
    dtype_fault,
    gate_fault,
    is_loaded_start,
    kept_half_fault,
    only_fault,
    same_value_statistics,
    shape_fault,
    statistics_fault,
    tied_fault,
    value_fault,
    widened_start,
)
from burnside.compare.observer import Observer
from burnside.compare.output_metrics import output_metrics
from burnside.compare.overruled_noise import overrule_noise
from burnside.compare.pairing import pair_renamed
from burnside.compare.reference_file import Reference
from burnside.compare.renames import Holders
from burnside.compare.rows import StructureProblem, TensorRow, is_optional
from burnside.compare.referee import Judge, max_abs
from burnside.compare.rounding import FLOOR_HALF_ULPS, HALF_ULP, sum_half_ulps
from burnside.compare.selection import Selection
from burnside.compare.statistics_rows import judge_statistics, side_statistics
from burnside.compare.summary import summarize
from burnside.compare.summed_terms import SummedTerms
from burnside.compare.tensor_diff import diff_arrays
from burnside.compare.tolerance import Tolerances
from burnside.errors import TraceError
from burnside.trace import TensorInfo, Trace, open_trace, parse_name
from burnside.trace.constant_buffers import buffer_of, unchanged_buffers
from burnside.trace.dtypes import FLOATS, STORAGE
from burnside.trace.names import STAGE_INDEX
from burnside.trace.statistics import Statistics

if TYPE_CHECKING:
    from burnside.progress import TensorProgress


def _nbytes(info: TensorInfo) -> int:
    return info.n * STORAGE[info.dtype].itemsize


def accumulation_of(trace: Trace) -> int:
    """The micro-batches per optimizer step a trace declares (metadata `accumulate`; 1 without it)."""
    value = trace.metadata.get("accumulate")
    return value if type(value) is int else 1


#: The stages that hold one batch's tensors: a step's, or each micro-batch's of an accumulating trace.
_BATCH_STAGES = frozenset({"inputs", "logits", "micro_inputs", "micro_logits", "micro_loss"})


def _accumulation_line(a: Trace, b: Trace) -> str:
    """One line when the two traces accumulate other numbers of micro-batches per optimizer step, "" otherwise."""
    m_a, m_b = accumulation_of(a), accumulation_of(b)
    if m_a == m_b:
        return ""

    def said(side: str, m: int) -> str:
        return (f"{side} sums the gradients of {m} micro-batches per optimizer step (metadata accumulate {m})" if m > 1
                else f"{side} takes one optimizer step per batch (no accumulate)")
    return (f"gradient accumulation differs: {said('A', m_a)}, {said('B', m_b)}; the steps' batches, losses and "
            "gradients are of other loops")


def _check_steps(a: Trace, b: Trace, one_sided: list[str], held_a: list[str], held_b: list[str]) -> None:
    """Raise TraceError when the traces hold different numbers of steps and the comparison would
    list the longer one's extra steps tensor by tensor (traces of two different runs, not a bug).
    ``held_a`` / ``held_b``: every name each trace holds, in full or as statistics."""
    steps_a = {p.step for n in held_a if (p := parse_name(n)) is not None}
    steps_b = {p.step for n in held_b if (p := parse_name(n)) is not None}
    if not steps_a or not steps_b or steps_a == steps_b:
        return
    shared = steps_a & steps_b
    extra = [n for n in one_sided if (p := parse_name(n)) is not None and p.step not in shared]
    if not extra:
        return  # --only picked shared steps
    unit, flag = ("batch", "--batches") if a.kind == "forward" else ("step", "--steps")
    if not shared:
        raise TraceError(f"{a.path} and {b.path} hold no {unit} in common: are they traces of the same run?")
    accumulation = _accumulation_line(a, b)
    if accumulation:
        raise TraceError(f"{accumulation}, and A recorded {len(steps_a)} steps, B {len(steps_b)}: record the port "
                         "with the PyTorch loop's accumulation (burn: Training::with_accumulation(M), or "
                         "TraceRecorder::with_accumulation(M)) for the same number of steps")
    more, fewer = ("A", "B") if len(steps_a) > len(steps_b) else ("B", "A")
    n_more, n_fewer = max(len(steps_a), len(steps_b)), min(len(steps_a), len(steps_b))
    plural = "batches" if unit == "batch" else "steps"
    raise TraceError(f"{more} recorded {n_more} {plural} and {fewer} {n_fewer}: record both sides for the same number "
                     f"of {plural} (with `burnside check`, arguments after `--` go to the port: `-- {flag} {n_more}`), "
                     f"or compare one {unit} both hold with --only 'step{min(shared)}.*'")


#: What records each kind of trace, by the framework that wrote it.
_RECORDERS = {
    ("pytorch", "forward"): "burnside.torch.record_forward",
    ("pytorch", "training"): "burnside.torch.record",
    ("burn", "forward"): "burnside_trace::Inference",
    ("burn", "training"): "burnside_trace::Training",
}


def _recorder(trace: Trace) -> str:
    kind = trace.kind
    known = _RECORDERS.get((trace.framework, kind))
    if known is not None:
        return f"{trace.framework}, as {known} records"
    both = " or ".join(v for (_, k), v in _RECORDERS.items() if k == kind)
    return f"{trace.framework}, as {both} records"


def check_same_kind(a: Trace, b: Trace) -> None:
    """Raise TraceError unless both traces record the same kind of run: forward passes over batches
    (`kind: forward`) or the steps of a training loop (`kind: training`, or none)."""
    if a.kind == b.kind:
        return
    raise TraceError(
        f"A ({a.path}) is a {a.kind} trace ({_recorder(a)}) and B ({b.path}) a {b.kind} trace ({_recorder(b)}): "
        "compare two forward traces (burnside.torch.record_forward against burnside_trace::Inference) or two "
        "training traces (burnside.torch.record against burnside_trace::Training)")


def _forward_order(names: list[str]) -> list[str]:
    """A forward trace's names in pipeline order with step 0's buffers moved up beside its parameters: both are
    the model as loaded, the start of every batch, so a fault there comes before the layers it feeds."""
    def key(item: tuple[int, str]) -> tuple:
        i, name = item
        parsed = parse_name(name)
        if parsed is None:
            return (1 << 30, 0, i)
        stage = STAGE_INDEX["params_before"] if is_loaded_start(name) else STAGE_INDEX[parsed.stage]
        return (parsed.step, stage, i)
    return [name for _, name in sorted(enumerate(names), key=key)]


def _loading_only(a: Trace, b: Trace, only_a: list[str], only_b: list[str]):
    """The start tensors only one side holds, as loading faults; a pair of the same values under two names
    (burn's `gamma` for PyTorch's `weight`, or any name) is named as one tensor named otherwise."""
    pairs, left_a, left_b = pair_renamed(only_a, only_b)
    faults = []
    for pair in pairs:
        if pair.a in a.statistics or pair.b in b.statistics:  # by the hash of the bytes
            same = a.statistics_of(pair.a).same_bits(b.statistics_of(pair.b))
        else:
            ia, ib = a.info(pair.a), b.info(pair.b)
            same = ia.shape == ib.shape and ia.dtype == ib.dtype and np.array_equal(
                np.ascontiguousarray(a.array(pair.a)).view(np.uint8),
                np.ascontiguousarray(b.array(pair.b)).view(np.uint8))
            a.release(pair.a)
            b.release(pair.b)
        if same:
            faults.append(only_fault(pair.a, "a", renamed=parse_name(pair.b).rest))
        else:
            left_a.append(pair.a)
            left_b.append(pair.b)
    # one tensor on each side of a shape no other unmatched tensor has, with other values: most often the port's field
    # named otherwise and so not loaded (burn-store matched nothing to it and kept its initialisation)
    rest_a, rest_b = [n for n in only_a if n in left_a], [n for n in only_b if n in left_b]
    shape_a, shape_b = ({n: (_info(t, n, t.statistics).shape, _info(t, n, t.statistics).dtype) for n in names}
                        for t, names in ((a, rest_a), (b, rest_b)))
    alike = {}
    for na, key in shape_a.items():
        bs = [nb for nb, other in shape_b.items() if other == key]
        if len(bs) == 1 and list(shape_a.values()).count(key) == 1:
            alike[na], alike[bs[0]] = bs[0], na
    faults += [only_fault(n, "a", shaped_like=_rest(alike.get(n))) for n in rest_a]
    faults += [only_fault(n, "b", shaped_like=_rest(alike.get(n))) for n in rest_b]
    return faults


def _tied_copies(a: Trace, b: Trace, only_b: list[str], comparison: Comparison) -> list[str]:
    """B's start tensors that PyTorch ties to another (metadata `tied`: `lm_head.weight` is `wte.weight`), which a
    forward trace records once, under the first name: a port that holds the head as a parameter of its own, set
    from the embedding's weight, holds a copy, bit for bit (`Comparison.tied_copies`, no failure); one with other
    values is a loading fault (`loading.tied_fault`). Returns the rest of ``only_b``."""
    tied = a.metadata.get("tied")
    if not isinstance(tied, dict):
        return only_b
    rest = []
    for name in only_b:
        parsed = parse_name(name)
        first = tied.get(parsed.rest) if parsed is not None and parsed.stage == "params_before" else None
        held = f"step{parsed.step}.params_before.{first}" if isinstance(first, str) else None
        if held is None or (held not in a and held not in a.statistics):
            rest.append(name)
            continue
        ours, theirs = a.statistics_of(held), b.statistics_of(name)
        if ours.same_bits(theirs):
            comparison.tied_copies.append(f"{parsed.rest} = {first}")
            continue
        full = held in a and name in b and ours.shape == theirs.shape
        comparison.loading.append(tied_fault(name, first, a.array(held) if full else None,
                                             b.array(name) if full else None))
        if full:
            a.release(held)
            b.release(name)
    return rest


def _rest(name: str | None) -> str | None:
    return parse_name(name).rest if name is not None and parse_name(name) is not None else name


def _nonpersistent(trace: Trace) -> set[str]:
    """The buffers a trace's metadata lists as registered with ``persistent=False``."""
    listed = trace.metadata.get("buffers_nonpersistent")
    return {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()


def _logits_alias(trace: Trace, name: str, other: set[str] | frozenset[str]) -> bool:
    """``name`` is a step's `outputs.*` that ``trace`` holds as an alias of that step's `logits`, which the other
    side (its names ``other``) records."""
    parsed = parse_name(name)
    if parsed is None or parsed.stage != "outputs":
        return False
    logits = f"step{parsed.step}.logits"
    return trace.aliases.get(name) == logits and logits in other


def _info(trace: Trace, name: str, statistics: dict[str, Statistics]) -> TensorInfo:
    """dtype and shape of a tensor held in full or as statistics."""
    held = statistics.get(name)
    return TensorInfo(held.dtype, held.shape) if held is not None else trace.info(name)


def _reference_statistics(reference: Reference, name: str) -> Statistics | None:
    """The float64 reference's statistics of ``name``: recorded, or computed from its tensor; None without it."""
    ref = reference.trace
    return ref.statistics_of(name) if name in ref.statistics or name in ref else None


def compare_traces(a: str | Path | Trace, b: str | Path | Trace, tolerances: Tolerances | None = None,
                   only: str | Sequence[str] | Selection | None = None, reference: Reference | None = None,
                   progress: TensorProgress | None = None, observer: Observer | None = None,
                   skip: str | Sequence[str] | None = None) -> Comparison:
    """Compare every tensor the two traces share (open, or their paths), one at a time, in pipeline order.

    ``only`` (a glob or several: `--only`) keeps the tensors any of them matches, ``skip`` (`--skip`) leaves out
    those any of its globs matches (`burnside.compare.selection`); a tensor left out is neither compared nor
    listed as on one side only.

    With a ``reference`` (`burnside.compare.open_reference`), each tensor is also judged by both
    sides' distances to it: a tensor out of tolerance passes when both sides are noise, unless its layer's
    settings, measured on each side, differ (`burnside.compare.overruled_noise`). The
    reference is trusted: `burnside.pipeline.compare_with_evidence` (and `record_and_compare`) refuse one
    given as a side and check it starts where A does (`start_checks`) before calling this.
    Never transposes: a shape that is the other's transpose is a structure problem with a hint.
    Raises TraceError when the traces share no tensor at all (not traces of the same run), or when one
    is a forward trace and the other a training trace.

    Two forward traces (`kind: forward`) start from the model as loaded: step 0's parameters and buffers,
    compared right after the inputs; each that is not bit-identical (or only on one side) is also named
    with its fault in ``comparison.loading`` (`burnside.compare.loading`), in place of a structure problem
    or an "only in" entry. Each `outputs.*` row gets its relative error, cosine similarity and, for a
    [batch, classes] output, top-1 agreement (`burnside.compare.output_metrics`).
    A name either trace holds as statistics only (format version 3) is judged by its statistics, the full side's
    computed from its tensor (`burnside.compare.statistics_rows`), into ``comparison.statistics``, never
    ``comparison.rows``. ``progress`` is told the tensors and bytes done before each tensor and at the end
    (`burnside.progress.Progress.tensors` draws it). ``observer`` is told the open traces before the
    first tensor and, with the finished comparison, after the last (`burnside.forensics.EvidenceGatherer`); the
    verdict is the same without it.
    """
    tolerances = tolerances or Tolerances()
    a, b = (side if isinstance(side, Trace) else open_trace(side) for side in (a, b))
    check_same_kind(a, b)
    # a port someone else wrote: its tensors named from what it loaded, its captured layers as A's modules
    b = align(a, b)
    names = _Names.of(a, b, Selection.of(only, skip))
    comparison = _new_comparison(a, b, tolerances, names)
    walk = _Walk.of(a, b, comparison, tolerances, reference)
    if observer is not None:
        observer.start(a, b)
    common = names.common
    if progress is not None:
        # a tensor held as statistics on a side reads nothing there
        sizes = [(0 if n in a.statistics else _nbytes(a.info(n))) + (0 if n in b.statistics else _nbytes(b.info(n)))
                 for n in common]
        done, total = 0, sum(sizes)
    for i, name in enumerate(common):
        if progress is not None:
            progress(i, len(common), done, total)
            done += sizes[i]
        walk.tensor(name)
    if progress is not None:
        progress(len(common), len(common), total, total)
    if walk.judge is not None:
        comparison.framework_differences = walk.judge.differences
        comparison.zero_gradients = list(walk.judge.zero_gradients.found.values())
        overrule_noise(a, b, comparison)  # while the traces are still open
    if observer is not None:
        observer.finish(a, b, comparison)  # while the traces are still open
    return comparison


@dataclass(frozen=True)
class _Names:
    """What two traces hold, sorted for compare: the names both hold (selected, in pipeline order), those only one
    side holds, and the constant buffers one side computes inline."""

    common: list[str]
    missing_in_a: list[str]
    missing_in_b: list[str]
    constants_a: list[str]
    constants_b: list[str]
    unchanged: set[str]
    crashed: str

    @classmethod
    def of(cls, a: Trace, b: Trace, selected: Selection) -> _Names:
        """Raises TraceError when nothing is left to compare, or when the traces hold other numbers of steps."""
        all_a, all_b = a.held_names, b.held_names
        crashed = str(b.metadata.get("crashed") or "")
        if crashed:
            # a port that crashed wrote what ran before it: A's later batches are not what it failed at
            steps_b = {p.step for n in all_b if (p := parse_name(n)) is not None}
            all_a = tuple(n for n in all_a if (p := parse_name(n)) is None or p.step in steps_b)
        names_a, names_b = set(all_a), set(all_b)
        # `--only grads.*` matches single-step names as the table prints them, without `step0.`
        common = [n for n in all_a if n in names_b and selected(n)]
        if a.kind == "forward":
            common = _forward_order(common)
        if not common and names_a & names_b == set():
            raise TraceError(f"{a.path} and {b.path} share no tensor names; are they traces of the same model "
                             "(see docs/trace-format.md for the names)?")
        if not common:
            said = ("leave no tensor present in both traces to compare" if selected.skip else
                    f"match{'es' if len(selected.only) == 1 else ''} no tensor present in both traces")
            raise TraceError(f"{selected.describe()} {said}")
        _check_steps(a, b, [n for n in (names_a ^ names_b) if selected(n)], all_a, all_b)
        missing_in_b = [n for n in all_a if n not in names_b and selected(n)]
        missing_in_a = [n for n in all_b if n not in names_a and selected(n)]
        # a buffer registered with persistent=False is a constant of the module (a causal mask), compared where both
        # sides hold it; one side only is no failure: the other computes it inline
        constant = _nonpersistent(a) | _nonpersistent(b)
        # so is a persistent buffer the run never changes (a positional table, a mask kept in the state_dict): the
        # other side computes it inline, and where its value differs the layer that reads it parts
        unchanged = unchanged_buffers(a, missing_in_b, constant) | unchanged_buffers(b, missing_in_a, constant)
        # a training step's first output is its logits (`burnside.torch.record` aliases `outputs.{first}` to them):
        # a port that records the others by name and returns the first is compared there
        missing_in_b = [n for n in missing_in_b if not _logits_alias(a, n, names_b)]
        missing_in_a = [n for n in missing_in_a if not _logits_alias(b, n, names_a)]
        constant |= unchanged
        constants_a = [n for n in missing_in_b if buffer_of(n) in constant]
        constants_b = [n for n in missing_in_a if buffer_of(n) in constant]
        return cls(common, [n for n in missing_in_a if n not in constants_b],
                   [n for n in missing_in_b if n not in constants_a], constants_a, constants_b, unchanged, crashed)


def _new_comparison(a: Trace, b: Trace, tolerances: Tolerances, names: _Names) -> Comparison:
    """The comparison before its first tensor: what each side holds alone, the settings the traces declare
    otherwise, and (two forward traces) the start tensors one side lacks as loading faults."""
    forward = a.kind == "forward"
    missing_in_a, missing_in_b = names.missing_in_a, names.missing_in_b
    comparison = Comparison(
        a=summarize(a),
        b=summarize(b),
        tolerances=tolerances,
        rows=[],
        only_in_a=[n for n in missing_in_b if not is_optional(n)],
        only_in_b=[n for n in missing_in_a if not is_optional(n)],
        unrecorded_in_a=[n for n in missing_in_a if is_optional(n)],
        unrecorded_in_b=[n for n in missing_in_b if is_optional(n)],
        kind=a.kind,
        order={name: i for i, name in enumerate(names.common)},
        constants_only_in_a=names.constants_a,
        constants_only_in_b=names.constants_b,
        persistent_constants=sorted(names.unchanged),
        optimizer_differences=[] if forward else optimizer_differences(a.optimizer, b.optimizer, a.params, b.params),
        accumulation="" if forward else _accumulation_line(a, b),
        crashed=names.crashed,
        renamed=dict(b.metadata.get("renamed_from") or {}),
        captured=list(b.metadata.get("captured_layers") or []),
        capture_off=str(b.metadata.get("capture_off") or ""),
        autodiff_differs=str(b.metadata.get("autodiff_differs") or ""),
        unread=list(b.metadata.get("captured_unread") or []),
        captured_kinds=dict(b.metadata.get("captured_kinds") or {}),
    )
    if comparison.accumulation:  # each side's batch tensors are named for its own loop: said once, not listed
        def batch_tensor(n: str) -> bool:
            return (p := parse_name(n)) is not None and p.stage in _BATCH_STAGES
        comparison.only_in_a = [n for n in comparison.only_in_a if not batch_tensor(n)]
        comparison.only_in_b = [n for n in comparison.only_in_b if not batch_tensor(n)]
    if forward:  # the model as loaded: a start tensor one side lacks is a loading fault
        start_a = [n for n in comparison.only_in_a if is_loaded_start(n)]
        start_b = [n for n in comparison.only_in_b if is_loaded_start(n)]
        comparison.loading += _loading_only(a, b, start_a, _tied_copies(a, b, start_b, comparison))
        comparison.only_in_a = [n for n in comparison.only_in_a if n not in start_a]
        comparison.only_in_b = [n for n in comparison.only_in_b if n not in start_b]
    return comparison


@dataclass
class _Walk:
    """compare's pass over the names both traces hold: each tensor into ``comparison`` (a row, a statistics row, a
    structure problem or a loading fault)."""

    a: Trace
    b: Trace
    comparison: Comparison
    tolerances: Tolerances
    reference: Reference | None
    judge: Judge | None
    summed: SummedTerms
    holders: Holders
    modules: object

    @classmethod
    def of(cls, a: Trace, b: Trace, comparison: Comparison, tolerances: Tolerances,
           reference: Reference | None) -> _Walk:
        """The pass, with the referee of ``reference`` (its pins noted on ``comparison``) when given."""
        adaptive = any(side.optimizer.get("name") in ("adam", "adamw") for side in (a, b)
                       if isinstance(side.optimizer, dict))
        judge = Judge(reference, adaptive=adaptive) if reference is not None else None
        if reference is not None:
            comparison.reference = reference.path
            pins = reference.trace.metadata
            comparison.reference_pinned = pins["pinned"] if isinstance(pins.get("pinned"), str) else ""
            comparison.reference_unpinned = pins["unpinned"] if isinstance(pins.get("unpinned"), str) else ""
        return cls(a, b, comparison, tolerances, reference, judge, SummedTerms(a), Holders(a),
                   a.metadata.get("modules"))

    @property
    def forward(self) -> bool:
        return self.comparison.forward

    def tensor(self, name: str) -> None:
        """Compare ``name``, which both traces hold."""
        a, b = self.a, self.b
        if name in a.statistics or name in b.statistics:
            if self.forward and is_loaded_start(name):
                fault = _loading_statistics(a, b, name, self.holders)
                if fault is not None:  # named with its fault (D014), as a full start tensor is
                    self.comparison.loading.append(fault)
                    return
            _compare_statistics(self.comparison, a, b, name, a.statistics, b.statistics, self.tolerances,
                                self.reference)
            return
        ia, ib = a.info(name), b.info(name)
        if ia.shape != ib.shape:
            self._shapes_differ(name, ia, ib)
        elif ia.dtype != ib.dtype:
            self._dtypes_differ(name, ia, ib)
        else:
            self._full(name, ia)

    def _release(self, name: str) -> None:
        self.a.release(name)
        self.b.release(name)

    def _shapes_differ(self, name: str, ia: TensorInfo, ib: TensorInfo) -> None:
        if self.forward and is_loaded_start(name):
            self.comparison.loading.append(shape_fault(name, self.a.array(name), self.b.array(name)))
            self._release(name)
            return
        transposed = len(ia.shape) == 2 and ia.shape == ib.shape[::-1]
        self.comparison.structure.append(
            StructureProblem(name, "shape", str(list(ia.shape)), str(list(ib.shape)), transposed))

    def _dtypes_differ(self, name: str, ia: TensorInfo, ib: TensorInfo) -> None:
        a, b, comparison = self.a, self.b, self.comparison
        loaded = self.forward and is_loaded_start(name)
        widened = widened_start(a.array(name), ia.dtype, ib.dtype) if loaded else None
        if widened is not None:
            # a half checkpoint loaded into a wider port (bf16 into f32): the widening is exact, so the load is
            # judged value for value in B's dtype, and a port that converted otherwise (through f16) is named
            tol = self.tolerances.for_name(name)
            stats = diff_arrays(widened, b.array(name), ib.dtype, tol)
            if not stats.identical:
                comparison.loading.append(value_fault(name, widened, b.array(name), ib.dtype, self.modules))
            self._release(name)
            comparison.rows.append(TensorRow(name, ib.dtype, ib.shape, stats, tol))
            return
        if loaded:
            kept = kept_half_fault(name, a.array(name), b.array(name), ia.dtype, ib.dtype)
            comparison.loading.append(kept or dtype_fault(name, ia.dtype, ib.dtype))
            self._release(name)
            return
        comparison.structure.append(StructureProblem(name, "dtype", ia.dtype, ib.dtype))

    def _full(self, name: str, ia: TensorInfo) -> None:
        """A tensor both sides hold in full, of the same shape and dtype: its row."""
        a, b, comparison = self.a, self.b, self.comparison
        loaded = self.forward and is_loaded_start(name)
        tol = self.tolerances.for_name(name)
        stats = diff_arrays(a.array(name), b.array(name), ia.dtype, tol)
        if loaded and not stats.identical:
            comparison.loading.append(value_fault(name, a.array(name), b.array(name), ia.dtype, self.modules,
                                                  self.holders.of(name, b.array(name), ia.dtype)))
        elif not stats.identical and is_loaded_start(name) \
                and (gates := gate_fault(name, a.array(name), b.array(name), self.modules)) is not None:
            # a training port that loaded the init file's gates in another order: D014 names the order (D006 would
            # only say the initial parameters differ, with a fix about rounding)
            comparison.loading.append(gates)
        parsed = parse_name(name)
        metrics = None
        if self.forward and ia.dtype in FLOATS and parsed is not None and parsed.stage == "outputs" and ia.n:
            metrics = output_metrics(a.array(name), b.array(name), ia.dtype)
        ref = None
        terms = self.summed.of(name)
        if self.judge is not None and ia.dtype in ("F32", "F64", "F16"):
            ref = self.judge.judge(name, parsed.stage if parsed else None, a.array(name), b.array(name),
                                   step=parsed.step if parsed else 0, param=parsed.param if parsed else None,
                                   terms=terms)
        sum_band = 0.0
        if self.judge is None and stats.out_of_tol and ia.dtype == "F32" and sum_half_ulps(terms) > FLOOR_HALF_ULPS:
            # no referee: a sum of many float32 terms rounds otherwise on each side, by up to this much
            sum_band = 2 * sum_half_ulps(terms) * HALF_ULP * max_abs(a.array(name))
        self._release(name)
        comparison.rows.append(TensorRow(name, ia.dtype, ia.shape, stats, tol, ref, metrics, sum_band, terms))


def _loading_statistics(a: Trace, b: Trace, name: str, holders: Holders) -> LoadingFault | None:
    """The loading fault of a start tensor either side holds as statistics only, None when it is bit-identical
    (same dtype, shape and hash of the bytes): the load check of a forward trace recorded with statistics."""
    sa, sb = a.statistics_of(name), b.statistics_of(name)
    if sa.same_bits(sb):
        return None
    if sa.shape != sb.shape:
        if len(sa.shape) >= 2 and sorted(sa.shape) == sorted(sb.shape) and sa.dtype == sb.dtype \
                and same_value_statistics(sa, sb):
            return statistics_fault(name, sa, sb, None)  # A's values, axes swapped (by the statistics)
        return LoadingFault(name, "shape", f"B holds shape {list(sb.shape)}, A {list(sa.shape)}",
                            "build the port's layer with the checkpoint's sizes (features, channels, kernel, hidden "
                            "size): a tensor of another shape cannot be the checkpoint's")
    if sa.dtype != sb.dtype:
        return dtype_fault(name, sa.dtype, sb.dtype)
    return statistics_fault(name, sa, sb, holders.of(name, sb))


def _compare_statistics(comparison: Comparison, a: Trace, b: Trace, name: str, stats_a: dict[str, Statistics],
                        stats_b: dict[str, Statistics], tolerances: Tolerances, reference: Reference | None) -> None:
    """One tensor at least one side holds as statistics: a structure problem when its shape or dtype differs,
    else a `StatisticsRow`."""
    ia, ib = _info(a, name, stats_a), _info(b, name, stats_b)
    if ia.shape != ib.shape:
        transposed = len(ia.shape) == 2 and ia.shape == ib.shape[::-1]
        comparison.structure.append(StructureProblem(name, "shape", str(list(ia.shape)), str(list(ib.shape)),
                                                     transposed))
        return
    if ia.dtype != ib.dtype:
        comparison.structure.append(StructureProblem(name, "dtype", ia.dtype, ib.dtype))
        return
    sa, held_a = side_statistics(a, name)
    sb, held_b = side_statistics(b, name)
    ref = _reference_statistics(reference, name) if reference is not None else None
    comparison.statistics.append(judge_statistics(name, sa, sb, held_a, held_b, tolerances.for_name(name),
                                                  with_reference=reference is not None, ref=ref))

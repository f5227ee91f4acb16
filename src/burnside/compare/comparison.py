"""`Comparison`: two traces compared tensor by tensor, and what each row found (`compare_traces` makes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
import numpy as np

from burnside.compare.loading import LoadingFault, is_loaded_start
from burnside.compare.output_metrics import OutputMetrics
from burnside.compare.referee import FrameworkDifference, RefStats
from burnside.compare.rounding import NOISE_FACTOR
from burnside.compare.statistics_rows import NOT_JUDGED, OUT_OF_TOLERANCE, StatisticsRow
from burnside.compare.summary import TraceSummary
from burnside.compare.tensor_diff import ElementStats
from burnside.compare.tolerance import Tolerance, Tolerances
from burnside.compare.zero_gradients import ZeroGradient
from burnside.trace import parse_name


@dataclass(frozen=True)
class TensorRow:
    """One tensor compared on both sides."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stats: ElementStats
    tol: Tolerance
    ref: RefStats | None = None  # both sides' distances to the float64 reference, when given
    #: a forward trace's output: relative error, cosine similarity, top-1 agreement (`output_metrics`)
    metrics: OutputMetrics | None = None
    #: without a reference, the rounding a float32 sum of the row's terms may carry on the two sides together
    #: (`rounding.sum_half_ulps` of its scale, twice), where that exceeds the plain floor and the row is out of
    #: tolerance; 0 otherwise
    sum_band: float = 0.0
    #: the float32 terms each element sums (`summed_terms`; 1 for most tensors)
    terms: int = 1

    @property
    def passed(self) -> bool:
        """Every element within tolerance, or (with a reference) both sides within rounding of it, or (without one)
        the row a float32 sum of many terms within the rounding such a sum carries (`sum_band`)."""
        return self.stats.out_of_tol == 0 or (self.ref is not None and self.ref.noise) or self.within_sum_rounding

    @property
    def within_sum_rounding(self) -> bool:
        """Without a reference, out of tolerance by no more than the rounding of a float32 sum of its terms."""
        return (self.ref is None and self.sum_band > 0 and self.stats.out_of_tol > 0
                and self.stats.nonfinite_a_only == self.stats.nonfinite_b_only == self.stats.nan_one_side == 0
                and self.stats.max_abs <= self.sum_band)

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


@dataclass
class Comparison:
    """The result of comparing trace A (usually PyTorch) with trace B (usually burn).

    It holds summaries of the two traces, not the traces: the rows and the summaries were read in compare's one
    pass (and the diagnosis evidence, `burnside.forensics`, beside it), so the rules need no trace. The report
    reads some tensors again (`burnside.report.distribution`: one tensor's histogram and the reference's losses).
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
    #: parameters with elements whose gradient is zero up to rounding, left out of the verdict
    zero_gradients: list[ZeroGradient] = field(default_factory=list)
    #: what both traces record: `training` (steps of a training loop) or `forward` (forward passes over batches)
    kind: str = "training"
    #: a forward trace's start tensors the port does not hold as PyTorch's model does, each with its fault
    #: (`burnside.compare.loading`; the diagnosis D014 names them)
    loading: list[LoadingFault] = field(default_factory=list)
    #: each compared name's place in compare's pipeline order (rows and structure problems alike)
    order: dict[str, int] = field(default_factory=dict)
    #: buffers one side records that a trace's metadata lists as registered with ``persistent=False``
    #: (`buffers_nonpersistent`: constants of the module, outside its state_dict, such as a causal mask
    #: kept as a constant), which the other side computes inline: listed, never a failure
    #: the optimizer settings the two traces declare otherwise (`burnside.optimizers.settings`; D005 names them): a
    #: failure even where the recorded steps do not show them yet
    optimizer_differences: list[str] = field(default_factory=list)
    #: the two traces accumulate gradients over other numbers of micro-batches per optimizer step (metadata
    #: `accumulate`, absent = 1): one line saying so (D018 names the fix), "" when they agree; a failure
    accumulation: str = ""
    #: B's forward pass panicked or failed (its trace's metadata `crashed`): what ran before it is compared.
    crashed: str = ""
    #: B's start tensors named after the tensor of A's they hold ({A's path: B's}, `burnside.compare.aligned`).
    renamed: dict = field(default_factory=dict)
    #: A's modules whose outputs B's captured forward pass gave (no tap), in order.
    captured: list = field(default_factory=list)
    #: Why B's forward pass was not captured (its metadata `capture_off`), "" where it was or B never tries.
    capture_off: str = ""
    #: B's forward pass without autodiff gives A's output where on its autodiff device it does not (metadata).
    autodiff_differs: str = ""
    #: A's parameters B holds and its captured forward pass never reads (a layer left out of the port's forward).
    unread: list = field(default_factory=list)
    #: The operation of B's captured graph that stands for each of A's module outputs ({trace name: burn-ir kind}).
    captured_kinds: dict = field(default_factory=dict)
    constants_only_in_a: list[str] = field(default_factory=list)
    constants_only_in_b: list[str] = field(default_factory=list)
    #: a forward trace's parameters PyTorch ties to another (metadata `tied`) that B holds as a copy of their own,
    #: bit for bit (`lm_head.weight = model.embed_tokens.weight`): no failure
    tied_copies: list[str] = field(default_factory=list)
    #: of those, the persistent buffers (in the state_dict) the run never changes, by buffer name
    persistent_constants: list[str] = field(default_factory=list)
    #: the float64 reference's metadata `pinned` (dtype-dependent constants it computed with float32's values,
    #: as the loop did: RMSNorm eps=None, torch.finfo) and `unpinned` (those it could not pin), "" when none
    reference_pinned: str = ""
    reference_unpinned: str = ""
    #: the tensors a trace holds as statistics only (format version 3), judged by their statistics in pipeline
    #: order (`burnside.compare.statistics_rows`); never in `rows`, so the rules and forensics see full tensors only
    statistics: list[StatisticsRow] = field(default_factory=list)

    def missing_buffers(self, side: str) -> list[str]:
        """The persistent buffers (`step{k}.buffers.*`, not `num_batches_tracked`) only ``side`` records: state
        of PyTorch's state_dict the other side does not hold, a failure named with its fix."""
        names = self.only_in_a if side == "a" else self.only_in_b
        return [n for n in names if (p := parse_name(n)) is not None and p.stage == "buffers"]

    @property
    def forward(self) -> bool:
        """Both traces are forward traces (`burnside.torch.record_forward`, `burnside_trace::Inference`)."""
        return self.kind == "forward"

    @property
    def unit(self) -> str:
        """What `step{k}` stands for in the report: `batch` in a forward trace, `step` in a training trace."""
        return "batch" if self.forward else "step"

    @property
    def loading_names(self) -> set[str]:
        """The tensors the loading check named."""
        return {f.name for f in self.loading}

    def side_name(self, side: str) -> str:
        """`B (burn)` for "b"."""
        return f"{side.upper()} ({(self.a if side == 'a' else self.b).framework})"

    @property
    def steps(self) -> int:
        """Steps covered (the larger of the two traces)."""
        return max(self.a.steps, self.b.steps, 1)

    @property
    def start_mismatch(self) -> list[TensorRow]:
        """Inputs / initial params (and, in a forward trace, the buffers as loaded) that are not bit-identical:
        outputs then measure that difference too."""
        return [r for r in self.rows if not r.stats.identical and self.is_start(r.name)]

    def is_start(self, name: str) -> bool:
        """Whether both sides must hold ``name`` bit-identically before anything is computed: every input and
        step 0's parameters, and in a forward trace also step 0's buffers (the model as loaded)."""
        return _is_shared_start(name) or (self.forward and is_loaded_start(name))

    @property
    def failed_rows(self) -> list[TensorRow]:
        """Rows with elements out of tolerance."""
        return [r for r in self.rows if not r.passed]

    def _first(self, candidates: list[tuple[str, object]]) -> object | None:
        """The earliest candidate in pipeline order, passing over what fed a layer (`layer_inputs`: an earlier
        layer's output, so that layer's own row is the divergence) unless nothing else diverges."""
        ordered = sorted(candidates, key=lambda c: self.order.get(c[0], 0))
        for name, item in ordered:
            parsed = parse_name(name)
            if parsed is None or parsed.stage != "layer_inputs":
                return item
        return ordered[0][1] if ordered else None

    def _divergences(self) -> list[tuple[str, object]]:
        rows: list[tuple[str, object]] = [(r.name, r) for r in self.rows if not r.passed]
        return rows + [(p.name, p) for p in self.structure if p.what == "shape"]

    @property
    def first_divergence(self) -> TensorRow | None:
        """The earliest tensor in pipeline order that is out of tolerance: usually the cause of the rest.

        None when a tensor whose shape differs comes first (`first_shape_divergence`): a layer that makes
        another shape (a convolution with another stride) is where the sides part, not a later layer."""
        first = self._first(self._divergences())
        return first if isinstance(first, TensorRow) else None

    @property
    def first_shape_divergence(self) -> StructureProblem | None:
        """The tensor whose shape differs, when it comes before every row out of tolerance."""
        first = self._first(self._divergences())
        return first if isinstance(first, StructureProblem) else None

    @property
    def first_divergence_name(self) -> str | None:
        """The name of the first divergence, a row out of tolerance or a shape that differs."""
        first = self._first(self._divergences())
        return first.name if first is not None else None  # type: ignore[attr-defined]

    def first_divergence_by_step(self) -> dict[int, str]:
        """Step (batch, in a forward trace) -> the first layer output or output that diverges there
        (out of tolerance, or of another shape), for each step where one does."""
        found: dict[int, list[tuple[str, object]]] = {}
        for name, item in self._divergences():
            parsed = parse_name(name)
            if parsed is not None and parsed.stage in ("activations", "logits", "outputs", "loss"):
                found.setdefault(parsed.step, []).append((name, item))
        return {k: self._first(v).name for k, v in sorted(found.items())}  # type: ignore[union-attr]

    @property
    def worst(self) -> float:
        """Largest absolute difference over all rows."""
        return max((r.stats.max_abs for r in self.rows), default=0.0)

    @property
    def diverged(self) -> list[str]:
        """The sides ("a", "b") of a training trace whose run holds a NaN or an infinity (logits, loss,
        gradients, parameters, optimizer state): from there on it proves nothing, even where both sides agree
        bit for bit (NaN where the other side has NaN)."""
        if self.forward:
            return []
        return [s for s, summary in (("a", self.a), ("b", self.b)) if summary.first_nonfinite is not None]

    @property
    def failed_statistics(self) -> list[StatisticsRow]:
        """Statistics rows proven out of tolerance."""
        return [s for s in self.statistics if s.verdict == OUT_OF_TOLERANCE]

    @property
    def unjudged_statistics(self) -> list[StatisticsRow]:
        """Statistics rows that are not bit-identical and not proven out of tolerance: what compare could not
        judge."""
        return [s for s in self.statistics if s.verdict == NOT_JUDGED]

    @property
    def first_statistics_parting(self) -> StatisticsRow | None:
        """The earliest statistics row, in pipeline order, that is not bit-identical: where the statistics show
        the sides part first (passing over what fed a layer, as `first_divergence` does)."""
        first = self._first([(s.name, s) for s in self.statistics if not s.bit_identical])
        return first if isinstance(first, StatisticsRow) else None

    @property
    def statistics_parting_first(self) -> StatisticsRow | None:
        """Where the sides part in tensors recorded as statistics before anything compared in full shows it (D020):

        - the first statistics row proven out of tolerance, when it comes (in pipeline order) before every tensor
          compared in full that is out of tolerance or of another shape: what those show may follow from it;
        - else the first not bit-identical statistics row of the step of the first full divergence that comes before
          it: a rule reading that divergence would take the step's earlier tensors (its parameters, its logits) to
          agree, and their statistics cannot say so.

        None when neither is found: the full tensors hold what the rules need."""
        full = self.first_divergence_name
        place = self.order.get(full, 0) if full is not None else None

        def before(row: StatisticsRow) -> bool:
            return place is None or self.order.get(row.name, 0) < place

        proven = self._first([(s.name, s) for s in self.failed_statistics if before(s)])
        if isinstance(proven, StatisticsRow):
            return proven
        parsed = parse_name(full) if full is not None else None
        if parsed is None:
            return None
        unproven = self._first([(s.name, s) for s in self.statistics
                                if not s.bit_identical and before(s) and s.step == parsed.step])
        return unproven if isinstance(unproven, StatisticsRow) else None

    @property
    def passed(self) -> bool:
        """Same structure, bit-identical start, every element within tolerance, no run diverged, the same
        optimizer declared, and no tensor held as statistics proven out of tolerance."""
        return not (self.failed_rows or self.only_in_a or self.only_in_b or self.structure or self.start_mismatch
                    or self.loading or self.diverged or self.optimizer_differences or self.accumulation
                    or self.failed_statistics or self.crashed)

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
        kind = self.module_class(row.name)
        before = None
        for other in self.rows:
            if other is row:
                break
            other_parsed = parse_name(other.name)
            if other_parsed and other_parsed.stage == "activations" and other_parsed.step == parsed.step:
                before = other
        return kind, before

    def module_class(self, name: str) -> str | None:
        """The PyTorch class (A's metadata `modules`) of the module a layer's output or input ``name`` belongs to;
        None for another tensor or a module the metadata does not name."""
        parsed = parse_name(name)
        if parsed is None or parsed.stage not in ("activations", "layer_inputs"):
            return None
        modules = self.a.metadata.get("modules")
        kind = modules.get(parsed.rest.split("#", 1)[0]) if isinstance(modules, dict) else None
        return kind if isinstance(kind, str) else None

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

    def rounding_upstream(self, row: TensorRow) -> float:
        """The largest |A - B| among the layer outputs recorded at ``row``'s step before it (A's execution order)
        that rounding can account for: each within tolerance, or out of it by no more than `NOISE_FACTOR` times the
        rounding shown before it in turn (a convolution's 1.3e-6 after 6e-8 upstream, which a GroupNorm then grows
        to 4.3e-6: a correct diffusion port had been told D010 at the norm). The rounding difference the two sides'
        arithmetic already shows on the way to ``row``; 0 when each is bit-identical (or none is recorded)."""
        parsed = parse_name(row.name)
        order = self.a.metadata.get("activations")
        if parsed is None or parsed.stage not in ("activations", "logits", "outputs") or not isinstance(order, list):
            return 0.0
        before = order[:order.index(parsed.rest)] if parsed.stage == "activations" and parsed.rest in order \
            else order
        by_name = {r.name: r for r in self.rows}
        upstream = 0.0
        for module in before:
            found = by_name.get(f"step{parsed.step}.activations.{module}")
            if found is None or found is row:
                continue
            if found.passed or found.stats.max_abs <= NOISE_FACTOR * upstream:
                upstream = max(upstream, found.stats.max_abs)
        return upstream

    def within_rounding_reach(self, row: TensorRow) -> bool:
        """Without a float64 reference, whether ``row``'s difference is no more than `NOISE_FACTOR` times the rounding
        difference already shown before it at its step (`rounding_upstream`): grown rounding can reach it, so
        nothing but a referee can tell it from a bug. Always False with a reference (which tells)."""
        if self.reference is not None:
            return False
        upstream = self.rounding_upstream(row)
        return 0.0 < row.stats.max_abs <= NOISE_FACTOR * upstream

    def display_name(self, name: str) -> str:
        """Drop `step0.` when both traces hold a single step, so A1's table reads like the seed's."""
        if self.steps == 1 and name.startswith("step0."):
            return name[len("step0."):]
        return name


def is_optional(name: str) -> bool:
    """A tensor a trace may hold without the other: a layer's output or input (what PyTorch fed a module,
    which a port reads from the init file rather than records), what the loss function inside PyTorch's loss was
    given, or a buffer burn does not keep."""
    parsed = parse_name(name)
    if parsed is None:
        return False
    return parsed.stage in ("activations", "layer_inputs", "loss_inputs") or (parsed.stage == "buffers"
                                             and parsed.rest.rsplit(".", 1)[-1] == "num_batches_tracked")


def _is_shared_start(name: str) -> bool:
    parsed = parse_name(name)
    return parsed is not None and parsed.is_shared_start

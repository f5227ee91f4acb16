"""`Comparison`: two traces compared tensor by tensor, and what each row found (`compare_traces` makes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from burnside.compare.divergence import Divergences
from burnside.compare.loading import LoadingFault, is_loaded_start
from burnside.compare.referee import FrameworkDifference
from burnside.compare.rounding_reach import RoundingReach
from burnside.compare.rows import StructureProblem, TensorRow, is_shared_start
from burnside.compare.statistics_rows import NOT_JUDGED, OUT_OF_TOLERANCE, StatisticsRow
from burnside.compare.summary import TraceSummary
from burnside.compare.tolerance import Tolerance, Tolerances
from burnside.compare.zero_gradients import ZeroGradient
from burnside.trace import parse_name


@dataclass
class Comparison(Divergences, RoundingReach):
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
        return is_shared_start(name) or (self.forward and is_loaded_start(name))

    @property
    def failed_rows(self) -> list[TensorRow]:
        """Rows with elements out of tolerance."""
        return [r for r in self.rows if not r.passed]

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

    def display_name(self, name: str) -> str:
        """Drop `step0.` when both traces hold a single step, so A1's table reads like the seed's."""
        if self.steps == 1 and name.startswith("step0."):
            return name[len("step0."):]
        return name

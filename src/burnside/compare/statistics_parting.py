"""Where the sides part in tensors recorded as statistics only (D020 names it, the table shows it)."""

from __future__ import annotations

from burnside.compare.comparison import Comparison
from burnside.compare.statistics_rows import StatisticsRow
from burnside.trace import parse_name


def first_statistics_parting(comparison: Comparison) -> StatisticsRow | None:
    """The earliest statistics row, in pipeline order, that is not bit-identical: where the statistics show
    the sides part first (passing over what fed a layer, as `first_divergence` does)."""
    first = comparison.earliest([(s.name, s) for s in comparison.statistics if not s.bit_identical])
    return first if isinstance(first, StatisticsRow) else None


def statistics_parting_first(comparison: Comparison) -> StatisticsRow | None:
    """Where the sides part in tensors recorded as statistics before anything compared in full shows it (D020):

    - the first statistics row proven out of tolerance, when it comes (in pipeline order) before every tensor
      compared in full that is out of tolerance or of another shape: what those show may follow from it;
    - else the first not bit-identical statistics row of the step of the first full divergence that comes before
      it: a rule reading that divergence would take the step's earlier tensors (its parameters, its logits) to
      agree, and their statistics cannot say so.

    None when neither is found: the full tensors hold what the rules need."""
    full = comparison.first_divergence_name
    place = comparison.order.get(full, 0) if full is not None else None

    def before(row: StatisticsRow) -> bool:
        return place is None or comparison.order.get(row.name, 0) < place

    proven = comparison.earliest([(s.name, s) for s in comparison.failed_statistics if before(s)])
    if isinstance(proven, StatisticsRow):
        return proven
    parsed = parse_name(full) if full is not None else None
    if parsed is None:
        return None
    unproven = comparison.earliest([(s.name, s) for s in comparison.statistics
                                    if not s.bit_identical and before(s) and s.step == parsed.step])
    return unproven if isinstance(unproven, StatisticsRow) else None

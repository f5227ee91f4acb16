"""`Observer`: a later stage told compare's open traces, before its pass and after it.

compare reads each trace once. A stage that needs the tensors themselves, not only the rows
(`burnside.forensics.EvidenceGatherer`, the evidence the diagnosis rules read), is told when the traces are
open and before the first tensor, and again after the last, while they are still open, so it reads
what it needs in that one pass instead of opening multi-GB traces again. It only reads: the comparison it is
shown after the pass is compare's finished verdict, the same with an observer or without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from burnside.compare.comparison import Comparison
    from burnside.trace import Trace


class Observer(Protocol):
    """Told the two open traces before compare's pass and, with the finished comparison, after it."""

    def start(self, a: Trace, b: Trace) -> None:
        """Before the first tensor is compared."""

    def finish(self, a: Trace, b: Trace, comparison: Comparison) -> None:
        """After the last tensor, before compare returns: the traces are still open. Must not change
        ``comparison``."""

"""`Divergences`: where two compared traces part first, in pipeline order (a part of `Comparison`): the earliest
row out of tolerance, or tensor of another shape, overall and at each step."""

from __future__ import annotations

from burnside.compare.rows import StructureProblem, TensorRow
from burnside.trace import parse_name


class Divergences:
    """The first divergence of a `Comparison`, read from its ``rows``, ``structure`` and ``order``."""

    def earliest(self, candidates: list[tuple[str, object]]) -> object | None:
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
        first = self.earliest(self._divergences())
        return first if isinstance(first, TensorRow) else None

    @property
    def first_shape_divergence(self) -> StructureProblem | None:
        """The tensor whose shape differs, when it comes before every row out of tolerance."""
        first = self.earliest(self._divergences())
        return first if isinstance(first, StructureProblem) else None

    @property
    def first_divergence_name(self) -> str | None:
        """The name of the first divergence, a row out of tolerance or a shape that differs."""
        first = self.earliest(self._divergences())
        return first.name if first is not None else None  # type: ignore[attr-defined]

    def first_divergence_by_step(self) -> dict[int, str]:
        """Step (batch, in a forward trace) -> the first layer output or output that diverges there
        (out of tolerance, or of another shape), for each step where one does."""
        found: dict[int, list[tuple[str, object]]] = {}
        for name, item in self._divergences():
            parsed = parse_name(name)
            if parsed is not None and parsed.stage in ("activations", "logits", "outputs", "loss"):
                found.setdefault(parsed.step, []).append((name, item))
        return {k: self.earliest(v).name for k, v in sorted(found.items())}  # type: ignore[union-attr]

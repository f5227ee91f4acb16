"""Which tensors a training trace records as statistics only (docs/trace-format.md, "Version 3: statistics"):
the steps kept in full (``full_steps``), the layer rule (``layer_statistics``), and the writer that records every
other tensor as its statistics. Used by the training loop (`burnside.recording.loop`), the forward recorder and
`burnside.torch.export_init`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
from torch import nn

from burnside.errors import BurnsideError
from burnside.trace.dtypes import dtype_of
from burnside.trace.metadata import statistics_refusal
from burnside.trace.names import parse_name
from burnside.trace.statistics import Statistics, statistics_of

#: A model with at least this many parameters records its layer inputs and activations as statistics unless
#: told otherwise (``layer_statistics=None``).
LAYER_STATISTICS_ABOVE = 50_000_000
#: Header room reserved per tensor that may be recorded as statistics (its entry in metadata `statistics`).
_STATISTICS_RESERVE = 320


def check_full_steps(full_steps: Sequence[int] | None, steps: int) -> list[int] | None:
    """``full_steps`` as step indices, ascending and without repeats (negative ones count from the end: -1 is
    the last step); None stays None (every step in full). A step the loop does not have, or anything but a list
    of integers, is refused in one line, before anything runs."""
    if full_steps is None:
        return None
    if isinstance(full_steps, (str, bytes, Mapping)) or not isinstance(full_steps, (Sequence, set, frozenset)) \
            or not all(isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) for k in full_steps):
        raise BurnsideError(f"full_steps must be a list of step indices (e.g. [0, -1]: the first and the last), "
                            f"not {full_steps!r}")
    asked = [int(k) for k in full_steps]
    if steps < 1:  # no loop: refused as such by the recorder
        return sorted(set(asked))
    missing = [k for k in asked if not -steps <= k < steps]
    if missing:
        span = "0, or -1" if steps == 1 else f"0-{steps - 1}, or -{steps} to -1"
        raise BurnsideError(f"full_steps={asked}: the loop has {steps} step{'s' if steps != 1 else ''} ({span})")
    return sorted({k % steps for k in asked})


def layer_statistics_for(model: nn.Module, layer_statistics: bool | None) -> bool:
    """Whether layer inputs and activations are recorded as statistics: as asked, or (None) when the model has
    at least `LAYER_STATISTICS_ABOVE` parameters."""
    if layer_statistics is None:
        return sum(p.numel() for p in model.parameters()) >= LAYER_STATISTICS_ABOVE
    if not isinstance(layer_statistics, bool):
        raise BurnsideError(f"layer_statistics must be True, False or None (None: True for a model of at least "
                            f"{LAYER_STATISTICS_ABOVE} parameters), not {layer_statistics!r}")
    return layer_statistics


class StatisticsWriter:
    """A trace writer that records each tensor in full or as its statistics (docs/trace-format.md, "Version 3:
    statistics"): at a step not in ``full_steps`` (None: every step is full) every tensor that may be statistics
    is; with ``layer``, every step's `layer_inputs` and `activations` are too. Never statistics: inputs,
    `step0.params_before.*`, 0-d scalars, integer and bool tensors. The statistics are computed at once, in
    chunks (`statistics_of`): no tensor is held. With every step full and no layer statistics it writes exactly
    what the writer it wraps would."""

    def __init__(self, writer, full_steps: list[int] | None, layer: bool) -> None:
        self._writer = writer
        self._full = None if full_steps is None else frozenset(full_steps)
        self._layer = layer
        self._statistics: dict[str, Statistics] = {}
        self.path = writer.path

    def __enter__(self) -> StatisticsWriter:
        self._writer.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._writer.__exit__(*exc_info)

    @property
    def active(self) -> bool:
        return self._full is not None or self._layer

    def as_statistics(self, name: str, array: np.ndarray) -> bool:
        """Whether ``name`` (holding ``array``) is recorded as statistics."""
        if not self.active:
            return False
        parsed = parse_name(name)
        if parsed is None:
            return False
        layer = self._layer and parsed.stage in ("layer_inputs", "activations")
        if not layer and (self._full is None or parsed.step in self._full):
            return False
        try:
            dtype = dtype_of(array)
        except ValueError:
            return False  # the writer refuses it with its own message
        return statistics_refusal(name, dtype, tuple(array.shape)) is None

    def add(self, name: str, array: np.ndarray) -> None:
        array = np.asarray(array)
        if self.as_statistics(name, array):
            stats = statistics_of(array, dtype_of(array))
            self._writer.add_statistics(name, stats)
            self._statistics[name] = stats
        else:
            self._writer.add(name, array)

    def alias(self, name: str, target: str, source: Callable[[], np.ndarray]) -> None:
        """``name`` is bit-identical to ``target`` (recorded before) and holds ``source()`` (called only when
        needed): an alias when both are full, the target's statistics when both are statistics, else recorded
        from ``source()``."""
        if not self.active:
            self._writer.alias(name, target)
            return
        array = np.asarray(source())
        if self.as_statistics(name, array):
            stats = self._statistics.get(target)
            if stats is None:
                stats = statistics_of(array, dtype_of(array))
            self._writer.add_statistics(name, stats)
            self._statistics[name] = stats
        elif target in self._statistics:
            self._writer.add(name, array)
        else:
            self._writer.alias(name, target)

    def describe(self, meta: dict) -> None:
        """Metadata `full_steps` and `layer_statistics` (what was asked), when statistics recording is on."""
        if self.active:
            if self._full is not None:
                meta["full_steps"] = sorted(self._full)
            meta["layer_statistics"] = self._layer

    def finish(self, metadata: Mapping) -> Path:
        return self._writer.finish(metadata)


def statistics_reserve(per_step: int, steps: int, full_steps: list[int] | None, layer: bool, layers: int) -> int:
    """Header room for the metadata `statistics` of a loop: every tensor of each statistics step, and the layer
    tensors of the others."""
    if full_steps is None and not layer:
        return 0
    statistics_steps = steps - len(full_steps) if full_steps is not None else 0
    return _STATISTICS_RESERVE * (statistics_steps * per_step + (steps - statistics_steps) * layers * int(layer))


__all__ = ["LAYER_STATISTICS_ABOVE", "StatisticsWriter", "check_full_steps", "layer_statistics_for",
           "statistics_reserve"]

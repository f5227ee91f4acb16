"""How many float32 terms each element of a training tensor sums, read from the trace's shapes alone (no data).

A loss reduces the step's outputs: a summed BCE over a VAE's 2048 output pixels is a float32 sum of 2048 terms,
and a framework that adds them one after another (burn's Flex) rounds it by tens of half-ulps where PyTorch's
pairwise sum rounds by a few. A parameter's gradient sums over every position its module's output has per
output feature (a conv bias over batch x height x width), and the optimizer state built from it carries that
rounding. The referee's floor (`rounding.sum_half_ulps`) and, without a reference, the rounding a sum may carry
scale with that count; every other tensor counts 1 (the plain floor).
"""

from __future__ import annotations

import math

from burnside.trace import Trace, parse_name


class SummedTerms:
    """The summed-term count of each tensor name of one trace (`of`), indexed once from its names and shapes."""

    def __init__(self, trace: Trace) -> None:
        self._outputs: dict[int, int] = {}  # step -> the largest element count among its logits and outputs
        self._rows: dict[tuple[int, str], int] = {}  # (step, module) -> its output's element count
        self._first_dim: dict[str, int] = {}  # param -> its leading dimension
        for name in trace.names:
            parsed = parse_name(name)
            if parsed is None:
                continue
            shape = trace.info(name).shape
            n = math.prod(shape)
            if parsed.stage in ("logits", "outputs"):
                self._outputs[parsed.step] = max(self._outputs.get(parsed.step, 0), n)
            elif parsed.stage == "activations" and "#" not in parsed.rest:
                self._rows[(parsed.step, parsed.rest)] = n
            elif parsed.stage in ("grads", "params_before") and shape:
                self._first_dim.setdefault(parsed.rest, shape[0])

    def of(self, name: str) -> int:
        """The terms each element of ``name`` sums: the step's largest output for its loss, its module's output
        positions per output feature for a parameter's gradient and optimizer state; 1 where the trace does not
        tell (no output recorded at that step, a module whose output is not recorded)."""
        parsed = parse_name(name)
        if parsed is None:
            return 1
        if parsed.stage in ("loss", "loss_after"):
            return max(self._outputs.get(parsed.step, 1), 1)
        param = parsed.param
        if parsed.stage in ("grads", "optim") and param and "." in param:
            positions = self._rows.get((parsed.step, param.rsplit(".", 1)[0]))
            first = self._first_dim.get(param)
            if positions and first:
                return max(positions // first, 1)
        return 1

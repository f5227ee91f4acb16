"""Every conformance case, by family (the burn side of each id: rust/conformance/src/cases)."""

from __future__ import annotations

from burnside.conformance.case import Case
from burnside.conformance.cases import activations, basic, conv, losses, norms, optimizers, sequence


def all_cases() -> list[Case]:
    """Every case, in the suite's order."""
    cases: list[Case] = [*basic.CASES, *conv.CASES, *norms.CASES, *activations.CASES, *losses.CASES,
                         *sequence.CASES, *optimizers.CASES]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise AssertionError(f"conformance case {case.id} is defined twice")
        seen.add(case.id)
    return cases

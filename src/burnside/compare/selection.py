"""Which tensors a comparison compares: `--only GLOB` (repeatable: a tensor is kept when any glob matches it) and
`--skip GLOB` (repeatable: a tensor any of them matches is left out). A glob matches a tensor's full name, or
its name without `step0.` as a single-step table prints it (`--only 'grads.*'`)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass


def _globs(given: str | Sequence[str] | None) -> tuple[str, ...]:
    if given is None:
        return ()
    return (given,) if isinstance(given, str) else tuple(given)


@dataclass(frozen=True)
class Selection:
    """The `--only` and `--skip` globs; no glob at all selects every tensor."""

    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()

    @classmethod
    def of(cls, only: str | Sequence[str] | Selection | None = None,
           skip: str | Sequence[str] | None = None) -> Selection:
        """From one glob or several for each option (None or an empty list: no such option)."""
        if isinstance(only, Selection):
            return cls(only.only, only.skip + _globs(skip))
        return cls(_globs(only), _globs(skip))

    def __call__(self, name: str) -> bool:
        forms = (name, name.removeprefix("step0."))

        def matches(globs: tuple[str, ...]) -> bool:
            return any(fnmatch.fnmatchcase(form, glob) for glob in globs for form in forms)

        return (not self.only or matches(self.only)) and not matches(self.skip)

    @property
    def everything(self) -> bool:
        return not self.only and not self.skip

    def describe(self) -> str:
        """`--only 'grads.*' --skip '*.bias'`, as the options were given."""
        return " ".join([*(f"--only {glob!r}" for glob in self.only), *(f"--skip {glob!r}" for glob in self.skip)])

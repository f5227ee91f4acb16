"""Progress of long work, drawn live on a terminal and kept out of pipes and logs.

Recorders and `compare_traces` take plain callbacks (`StepProgress`, `TensorProgress`) and
know nothing of terminals; a `Progress` turns them into live lines on its console:

    with Progress(Console(stderr=True)) as progress:
        record(model, opt, batch, path, steps=4, progress=progress.steps("recording pytorch"))
        compare_traces(a, b, progress=progress.tensors())

On a terminal each piece of work gets a line (``recording pytorch: step 3/4``, ``comparing:
tensor 120/512, 310/1024 MiB``) once it has run for `DELAY` seconds, so A1's millisecond
traces never flicker, and the lines vanish when the display closes. Off a terminal the
callbacks are None and nothing is printed: output read by programs and CI logs stays clean.
The one exception is `Activity` (a cargo build), which off a terminal says every `EVERY`
seconds that it is still running, because a cold build is minutes of work and a log that says
nothing for that long looks hung (and some CI systems stop a job that prints nothing for 10 min).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self

from rich import progress as rich_progress
from rich.console import Console
from rich.table import Table

#: Seconds a piece of work runs before its line appears on a terminal.
DELAY = 0.5
#: Seconds between an activity's "still running" lines off a terminal.
EVERY = 30.0


class StepProgress(Protocol):
    """Told by a recorder before its first step (``done`` 0) and after each step.

    ``part`` names one of several recordings behind one call (the float64 reference's
    variant run), None for the only or main one.
    """

    def __call__(self, done: int, total: int, part: str | None = None) -> None: ...


#: Told by `compare_traces` after each tensor: tensors done, tensors in all, bytes done and in all
#: (both traces' bytes of the tensors compared).
TensorProgress = Callable[[int, int, int, int], None]


class _DelayedProgress(rich_progress.Progress):
    """rich's Progress showing only the tasks that ran (or have been running) for ``delay`` seconds."""

    def __init__(self, *columns, delay: float, **kwargs) -> None:
        super().__init__(*columns, **kwargs)
        self.delay = delay

    def make_tasks_table(self, tasks) -> Table:
        def ran(task: rich_progress.Task) -> float:
            return (task.finished_time if task.finished else task.elapsed) or 0.0

        return super().make_tasks_table([t for t in tasks if ran(t) >= self.delay])


#: The display drawing on the terminal now; a Progress opened while one is active (cargo inside
#: `burnside run`) adds its lines to it, since a terminal has room for one live display.
_active: Progress | None = None


class Progress:
    """Live progress lines on ``console`` when it is a terminal; silent callbacks elsewhere.

    ``console`` None is silent everywhere (a library call nobody watches). Use it as a
    context manager; the callbacks it hands out draw only while it is open. ``delay`` and
    ``every`` default to `DELAY` and `EVERY`.
    """

    def __init__(self, console: Console | None, *, delay: float | None = None, every: float | None = None) -> None:
        self.console = console
        self.live = console is not None and console.is_terminal
        self.every = EVERY if every is None else every
        delay = DELAY if delay is None else delay
        self._own = _DelayedProgress(
            rich_progress.SpinnerColumn(), rich_progress.TextColumn("{task.description}"),
            rich_progress.BarColumn(), rich_progress.TimeElapsedColumn(),
            console=console, transient=True, delay=delay) if self.live else None
        self._host: Progress | None = None
        self._tasks: list[rich_progress.TaskID] = []

    @property
    def _bars(self) -> rich_progress.Progress | None:
        if self._host is not None:
            return self._host._bars
        return self._own if self._own is not None and self._own.live.is_started else None

    def __enter__(self) -> Self:
        global _active
        if self._own is not None:
            if _active is not None:
                self._host = _active
            else:
                self._own.start()
                _active = self
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        global _active
        if self._host is not None:
            for task in self._tasks:
                self._host._own.remove_task(task)
            self._host = None
        elif _active is self:
            self._own.stop()
            _active = None
        self._tasks = []

    def _add(self, description: str, total: float | None) -> rich_progress.TaskID | None:
        bars = self._bars
        if bars is None:
            return None
        task = bars.add_task(description, total=total)
        self._tasks.append(task)
        return task

    def steps(self, what: str) -> StepProgress | None:
        """A recorder's callback drawing ``WHAT: step k/N``; None when nothing is drawn."""
        if self._bars is None:
            return None
        tasks: dict[str | None, rich_progress.TaskID | None] = {}  # a line per part

        def show(done: int, total: int, part: str | None = None) -> None:
            bars = self._bars
            if bars is None:
                return
            description = f"{what}{f', {part}' if part else ''}: step {done}/{total}"
            if part not in tasks:
                tasks[part] = self._add(description, total)
            bars.update(tasks[part], description=description, completed=done, total=total)

        return show

    def items(self, what: str) -> Callable[[int, int, str], None] | None:
        """A callback drawing ``WHAT k/N: NAME`` for a run of named items (conformance cases); None when nothing
        is drawn."""
        if self._bars is None:
            return None
        line = self._line()

        def show(done: int, total: int, name: str) -> None:
            line(f"{what} {done}/{total}{f': {name}' if name else ''}", max(total, 1), done)

        return show

    def tensors(self, what: str = "comparing") -> TensorProgress | None:
        """`compare_traces`' callback drawing ``WHAT: tensor i/M, X/Y MiB``; None when nothing is drawn."""
        if self._bars is None:
            return None
        line = self._line()

        def show(done: int, total: int, bytes_done: int, bytes_total: int) -> None:
            line(f"{what}: tensor {done}/{total}, {_mib(bytes_done)}/{_mib(bytes_total)} MiB", max(bytes_total, 1),
                 bytes_done if bytes_total else 1)

        return show

    def _line(self) -> Callable[[str, float, float], None]:
        """One bar, added on its first update: ``update(description, total, completed)``."""
        task: rich_progress.TaskID | None = None

        def update(description: str, total: float, completed: float) -> None:
            nonlocal task
            bars = self._bars
            if bars is None:
                return
            if task is None:
                task = self._add(description, total)
            bars.update(task, description=description, completed=completed, total=total)

        return update

    def activity(self, what: str) -> Activity:
        """A piece of work without a known end (a cargo build): a live line, or lines every `every` s off a terminal."""
        return Activity(self, what)


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f}" if n >= 2**20 else f"{n / 2**20:.1f}"


class Activity:
    """Work whose size is not known in advance, described by a status that changes as it goes."""

    def __init__(self, progress: Progress, what: str) -> None:
        self.progress = progress
        self.what = what
        self.start = time.monotonic()
        self._task = progress._add(what, None)
        self._last_line = self.start
        self.lines = 0  # "still running" lines printed off a terminal

    def update(self, status: str) -> None:
        """The work's state now, e.g. ``12 of about 180 crates (burn-core)``."""
        bars = self.progress._bars
        if self._task is not None and bars is not None:
            bars.update(self._task, description=f"{self.what}: {status}")
            return
        console = self.progress.console
        now = time.monotonic()
        if console is not None and not self.progress.live and now - self._last_line >= self.progress.every:
            self._last_line = now
            self.lines += 1
            console.print(f"{self.what}: {status}, {now - self.start:.0f} s")

    def finish(self, summary: str) -> None:
        """Done: off a terminal, ``summary`` closes the "still running" lines, if there were any."""
        bars = self.progress._bars
        if self._task is not None and bars is not None:
            bars.update(self._task, description=f"{self.what}: {summary}", total=1, completed=1)
        elif self.lines and self.progress.console is not None:
            self.progress.console.print(f"{self.what}: {summary}")


__all__ = ["DELAY", "EVERY", "Activity", "Progress", "StepProgress", "TensorProgress"]

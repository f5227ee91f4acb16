"""burnside's pytest plugin (registered by entry point): parity tests in a user's own suite.

    import pytest

    @pytest.mark.parity
    def test_port(burnside_parity):
        burnside_parity.check(record_my_model, reference=record_my_reference,
                              crate="rust/my-port", bin="my-port", args=["--steps", "3"])

`record_my_model(path) -> path` records the PyTorch side (`burnside.torch.record`) and
`record_my_reference(path) -> path` the float64 reference of the same loop
(`burnside.reference.record_reference`, optional); each recorder runs once per session however
many tests use it. `check` goes through `burnside check`'s pipeline (`burnside.pipeline`): the
reference is checked against the PyTorch trace's start before the port is built, the port runs
with the `burnside check` contract from that start, and the test fails with compare's report when
they differ. A problem the user can fix (a wrong reference, a crate that does not build, a port
that crashes) fails the test with burnside's one-line message instead of a traceback.
examples/pytest-parity is a complete project.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from burnside.compare import Comparison, Tolerances
from burnside.errors import BurnsideError
from burnside.pipeline import record_and_compare
from burnside.testing import failure_message, tolerances_of

#: Writes a trace (the PyTorch side, or the float64 reference) at the path it is given and returns it.
Recorder = Callable[[Path], Path]


class ParityChecker:
    """Records each PyTorch side (and float64 reference) once per session and checks burn ports against it."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._recorded: dict[tuple[str, object], Path] = {}

    def __repr__(self) -> str:
        # pytest prints a failing test's fixtures: say where the traces are
        return f"<burnside parity checks, traces in {self._directory}>"

    def _record_once(self, kind: str, record: Recorder) -> Path:
        if (kind, record) not in self._recorded:
            # each reference in a file name of its own: its variants are written next to it, named after it
            path = self._directory / f"{kind}-{len(self._recorded)}.safetensors"
            self._recorded[kind, record] = Path(record(path))
        return self._recorded[kind, record]

    def torch_trace(self, record: Recorder) -> Path:
        """The PyTorch trace ``record`` writes, recorded on first use and reused for the session."""
        return self._record_once("torch", record)

    def reference_trace(self, record: Recorder) -> Path:
        """The float64 reference ``record`` writes, recorded on first use and reused for the session."""
        return self._record_once("reference", record)

    def check(self, torch: Path | str | Recorder, *, crate: Path | str, bin: str, args: Sequence[str] = (),
              reference: Path | str | Recorder | None = None, tolerances: Tolerances | float | None = None,
              only: str | None = None) -> Comparison:
        """Build and run the port ``bin`` of ``crate`` from the PyTorch trace's start; assert parity.

        ``torch`` and ``reference`` are trace files or recorders (run once per session); with a
        reference, rounding noise passes and a real difference names its side (`assert_parity`).
        """
        __tracebackhide__ = True  # a failing test shows compare's report, not these frames
        from burnside.burn.port import record_port

        try:
            torch_path = self.torch_trace(torch) if callable(torch) else Path(torch)
            reference_path = self.reference_trace(reference) if callable(reference) else reference
            out_dir = self._directory / f"{bin}-{len(list(self._directory.iterdir()))}"

            def burn_side(path: Path, torch_trace: Path) -> Path:
                return record_port(torch_trace, Path(crate), bin, list(args), out_dir, out=path)

            parity = record_and_compare(torch_path, burn_side, torch_out=torch_path,
                                        burn_out=out_dir / f"{bin}.burn.safetensors",
                                        tolerances=tolerances_of(tolerances), only=only,
                                        reference=Path(reference_path) if reference_path is not None else None)
        except BurnsideError as error:
            pytest.fail(f"burnside: {error}", pytrace=False)
        if not parity.passed:
            raise AssertionError(failure_message(parity.comparison, parity.diagnoses))
        return parity.comparison


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "parity: compares a burn port with its PyTorch original (burnside)")


@pytest.fixture(scope="session")
def burnside_parity(tmp_path_factory: pytest.TempPathFactory) -> ParityChecker:
    """Check burn ports against PyTorch traces recorded once per session."""
    return ParityChecker(tmp_path_factory.mktemp("burnside"))

"""burnside's pytest plugin (registered by entry point): parity tests in a user's own suite.

    import pytest

    @pytest.mark.parity
    def test_port(burnside_parity):
        burnside_parity.check(record_my_model, crate="rust/my-port", bin="my-port", args=["--steps", "3"])

`record_my_model(path) -> path` records the PyTorch side (`burnside.torch.record`); it runs once
per session however many tests use it. `check` builds the port, runs it with the `burnside check`
contract from that trace's start, and fails the test with compare's report when they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from burnside.compare import Comparison, Tolerances
from burnside.testing import assert_parity


class ParityChecker:
    """Records each PyTorch side once per session and checks burn ports against it."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._torch: dict[object, Path] = {}

    def torch_trace(self, record: Callable[[Path], Path]) -> Path:
        """The PyTorch trace ``record`` writes, recorded on first use and reused for the session."""
        if record not in self._torch:
            path = self._directory / f"torch-{len(self._torch)}.safetensors"
            self._torch[record] = Path(record(path))
        return self._torch[record]

    def check(self, torch: Path | str | Callable[[Path], Path], *, crate: Path | str, bin: str,
              args: Sequence[str] = (), tolerances: Tolerances | float | None = None,
              only: str | None = None) -> Comparison:
        """Build and run the port ``bin`` of ``crate`` from the PyTorch trace's start; assert parity."""
        from burnside.burn.port import record_port

        torch_path = self.torch_trace(torch) if callable(torch) else Path(torch)
        out_dir = self._directory / f"{bin}-{len(list(self._directory.iterdir()))}"
        burn = record_port(torch_path, Path(crate), bin, list(args), out_dir)
        return assert_parity(torch_path, burn, tolerances=tolerances, only=only)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "parity: compares a burn port with its PyTorch original (burnside)")


@pytest.fixture(scope="session")
def burnside_parity(tmp_path_factory: pytest.TempPathFactory) -> ParityChecker:
    """Check burn ports against PyTorch traces recorded once per session."""
    return ParityChecker(tmp_path_factory.mktemp("burnside"))

"""burnside: prove a burn port of a PyTorch training loop trains the same.

The public API, small on purpose: read and write traces, compare them, name the failure.
Recording the PyTorch side lives in `burnside.torch` (it needs the `torch` extra).
"""

__version__ = "0.1.0"

from burnside.compare import Comparison, Tolerance, Tolerances, compare_traces  # noqa: E402
from burnside.diagnose import Diagnosis, diagnose  # noqa: E402
from burnside.errors import BuildError, BurnsideError, RunError, TraceError  # noqa: E402
from burnside.trace import Trace, convert_trace, open_trace, write_trace  # noqa: E402

__all__ = [
    "BuildError",
    "BurnsideError",
    "Comparison",
    "Diagnosis",
    "RunError",
    "Tolerance",
    "Tolerances",
    "Trace",
    "TraceError",
    "__version__",
    "compare_traces",
    "convert_trace",
    "diagnose",
    "open_trace",
    "write_trace",
]

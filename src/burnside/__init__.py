"""burnside: prove a burn port of a PyTorch training loop trains the same."""

from burnside.errors import BuildError, BurnsideError, RunError, TraceError

__version__ = "0.1.0"

__all__ = ["BurnsideError", "TraceError", "BuildError", "RunError", "__version__"]

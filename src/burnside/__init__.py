"""burnside: prove a burn port of a PyTorch training loop trains the same.

The public API, small on purpose: record the PyTorch side, read and write traces, compare them,
name the failure, and check parity inside a test. Each name also lives in its module, where the docs
import it from (`burnside.torch.record`, `burnside.testing.assert_parity`). `compare_traces` gives the verdict;
`compare_with_evidence` is the pipeline's compare, the same verdict with the evidence the diagnosis rules read
(gathered in the same pass) and a reference refused as a side and checked to start where A does: what
`diagnose` needs.

`record`, `record_forward`, `export_init` and `record_reference` need the `torch` extra: they are attributes of the
package, left out of `__all__` so that `from burnside import *` works without torch.
"""

__version__ = "0.1.0"

# The public names are imported on first use (PEP 562), so that commands which
# need none of them (`burnside lint`, `--version`) do not pay for numpy and the
# trace readers at start-up.
_PUBLIC = {
    "export_init": "burnside.torch",
    "record": "burnside.torch",
    "record_forward": "burnside.torch",
    "record_reference": "burnside.reference",
    "assert_parity": "burnside.testing",
    "Comparison": "burnside.compare",
    "Tolerance": "burnside.compare",
    "Tolerances": "burnside.compare",
    "compare_traces": "burnside.compare",
    "compare_with_evidence": "burnside.pipeline",
    "Diagnosis": "burnside.diagnose",
    "diagnose": "burnside.diagnose",
    "BuildError": "burnside.errors",
    "BurnsideError": "burnside.errors",
    "RunError": "burnside.errors",
    "TraceError": "burnside.errors",
    "Trace": "burnside.trace",
    "convert_trace": "burnside.trace",
    "open_trace": "burnside.trace",
    "write_trace": "burnside.trace",
}


def __getattr__(name: str):
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module 'burnside' has no attribute {name!r}")
    import importlib

    module, attribute = where if isinstance(where, tuple) else (where, name)
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


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
    "assert_parity",
    "compare_traces",
    "compare_with_evidence",
    "convert_trace",
    "diagnose",
    "open_trace",
    "write_trace",
]

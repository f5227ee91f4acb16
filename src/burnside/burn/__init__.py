"""The burn side: build burnside's Rust programs (or a user's port) with cargo and run them.

- `locate`: find cargo, the shared target directory and burnside's workspace, and ask cargo what
  a crate holds (its packages, binaries, workspace).
- `cargo`: build with a progress display, and build the programs that must not compile to read
  rustc's verdict.
- `binary`: run a built program with a timeout and parse its `JSON: {...}` line (or expect a panic).
- `a1`: record the seed's A1 model on burn (`burnside run a1`).
- `port`: build a user's port and run it from the PyTorch side's starting point (`burnside check`).
- `freshness`: which sources a binary in the shared target directory was built from.
- `programs`: burnside's own programs, built once per process and run by name.
"""

from burnside.burn.binary import BinaryRun, expect_panic, run_binary
from burnside.burn.cargo import (
    CargoRun,
    CompileError,
    Diagnostic,
    build,
    build_workspace,
    check_crate,
    expect_compile_error,
    run_cargo,
)
from burnside.burn.locate import find_cargo, rust_workspace, target_dir

__all__ = [
    "BinaryRun",
    "CargoRun",
    "CompileError",
    "Diagnostic",
    "build",
    "build_workspace",
    "check_crate",
    "expect_compile_error",
    "expect_panic",
    "find_cargo",
    "run_binary",
    "run_cargo",
    "rust_workspace",
    "target_dir",
]

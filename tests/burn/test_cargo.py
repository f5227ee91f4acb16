"""The cargo driver: target directory, the Rust unit tests, and the one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnside.burn.binary import run_binary
from burnside.burn.cargo import build, run_workspace_tests
from burnside.burn.locate import DEFAULT_TARGET_DIR, find_cargo, rust_workspace, target_dir
from burnside.errors import BuildError, RunError


def test_rust_unit_tests_pass(programs):
    # under burnside's lock, from this checkout's sources: a burnside build of another checkout running at the
    # same time in the shared target directory cannot replace a test binary mid-run
    proc = run_workspace_tests(rust_workspace(), ["--workspace", "--release"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "test result: ok" in proc.stdout and "FAILED" not in proc.stdout


def test_target_dir_follows_cargo_target_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path))
    assert target_dir() == tmp_path
    monkeypatch.delenv("CARGO_TARGET_DIR")
    assert target_dir() == DEFAULT_TARGET_DIR == Path.home() / ".cache/burnside/cargo-target"


def test_no_cargo_on_path_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError,
                       match=r"^cargo not found: install Rust with rustup \(https://rustup.rs\) and re-run$"):
        find_cargo()


def test_a_crate_that_fails_reports_rustc_first_error_and_the_command(tmp_path):
    crate = tmp_path / "broken"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "broken"\nversion = "0.1.0"\nedition = "2024"\n[workspace]\n')
    (crate / "src/main.rs").write_text("fn main() {\n    let x: u32 = \"text\";\n    let y: u32 = true;\n}\n")
    with pytest.raises(BuildError) as caught:
        build(crate, bins=["broken"])
    message = str(caught.value)
    assert "error[E0308]: mismatched types (src/main.rs:2)" in message
    assert "src/main.rs:3" not in message  # the first error only
    assert "cd " in message and "cargo build --message-format=json --release --bin broken" in message


def test_a_binary_that_fails_is_named_with_its_last_stderr_line(programs, tmp_path):
    with pytest.raises(RunError, match=r"^train-step exited with status 1: train-step: --optim nesterov: "
                                       r"expected sgd, momentum, adam, adamw, rmsprop, adagrad, "
                                       r"adafactor, muon or lbfgs$"):
        run_binary(programs.executables["train-step"], ["-o", str(tmp_path / "t.safetensors"), "--optim", "nesterov"])


def test_a_binary_that_writes_no_trace_is_an_error(programs, tmp_path):
    with pytest.raises(RunError, match="moves exited cleanly but wrote no trace"):
        run_binary(programs.executables["moves"], [], expect_file=tmp_path / "never.safetensors")


def test_an_unwritable_trace_path_is_an_error_from_the_recorder_not_a_panic(programs, tmp_path):
    with pytest.raises(RunError) as caught:
        run_binary(programs.executables["train-step"], ["-o", str(tmp_path / "missing-dir/t.safetensors")])
    message = str(caught.value)
    assert "panicked" not in message
    assert "missing-dir/t.safetensors: No such file or directory" in message


def _crate(tmp_path, name: str, main: str):
    crate = tmp_path / name
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2024"\n[workspace]\n')
    (crate / "src/main.rs").write_text(main)
    return build(crate, bins=[name]).executables[name]


def test_a_panicking_port_is_named_with_the_panic_place_and_message(tmp_path, monkeypatch):
    binary = _crate(tmp_path, "panics", "fn main() {\n"
                    "    let v: Vec<u32> = std::env::args().skip(9).map(|_| 1).collect();\n"
                    "    println!(\"{}\", v[2]);\n}\n")
    for backtrace in ("0", "1"):  # with a backtrace too: the place and message, not the frames
        monkeypatch.setenv("RUST_BACKTRACE", backtrace)
        with pytest.raises(RunError) as caught:
            run_binary(binary, [])
        assert str(caught.value) == ("panics panicked in its own code at src/main.rs:3:21: "
                                     "index out of bounds: the len is 0 but the index is 2")


def test_a_port_that_reports_several_lines_is_relayed_whole(tmp_path):
    binary = _crate(tmp_path, "reports", "fn main() {\n    eprintln!(\"reports: the module does not fit\");\n"
                    "    eprintln!(\"  `embed.weight` <- `emb.weight`?\");\n    eprintln!(\"fix: rename it\");\n"
                    "    std::process::exit(1);\n}\n")
    with pytest.raises(RunError) as caught:
        run_binary(binary, [])
    assert str(caught.value) == ("reports exited with status 1:\n  reports: the module does not fit\n"
                                 "    `embed.weight` <- `emb.weight`?\n  fix: rename it")

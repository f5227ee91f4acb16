"""`burnside lint --rustc` against a real, dependency-free crate (a real cargo check)."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from burnside.cli import app
from tests.lint.fixture_findings import FIXTURES

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not on PATH")

CRATE = FIXTURES / "rustc_crate"
runner = CliRunner()


def test_rustc_warnings_are_merged_and_deduplicated(tmp_path, monkeypatch):
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    monkeypatch.chdir(CRATE)
    result = runner.invoke(app, ["lint", "src", "--format", "json", "--rustc", "."])
    assert result.exit_code == 1, result.stderr
    got = [(d["rule"], d["path"], d["line"], d["column"], d["source"]) for d in json.loads(result.stdout)]
    assert got == [
        # Found by both; kept once, as the tree-sitter finding.
        ("BS001", "src/main.rs", 31, 5, "burnside"),
        # `g` is not recognisably gradients to tree-sitter; rustc's type-aware warning adds it.
        ("BS001", "src/main.rs", 34, 5, "rustc"),
    ]
    # CARGO_TARGET_DIR was honoured.
    assert (tmp_path / "target").is_dir()


def test_without_rustc_only_the_tree_sitter_finding(monkeypatch):
    monkeypatch.chdir(CRATE)
    result = runner.invoke(app, ["lint", "src", "--format", "json"])
    assert [d["line"] for d in json.loads(result.stdout)] == [31]


def test_broken_crate_is_one_line_and_exit_two(tmp_path, monkeypatch):
    crate = tmp_path / "broken"
    shutil.copytree(CRATE, crate)
    (crate / "src" / "main.rs").write_text("fn main() { let x: u32 = \"no\"; }\n")
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    result = runner.invoke(app, ["lint", str(crate), "--rustc", str(crate)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: cargo check failed in {crate}: mismatched types")


def test_not_a_crate_is_exit_two(tmp_path):
    result = runner.invoke(app, ["lint", str(CRATE / "src"), "--rustc", str(tmp_path)])
    assert result.exit_code == 2
    assert "has no Cargo.toml" in result.stderr


def test_missing_cargo_is_one_line_and_exit_two(tmp_path, monkeypatch):
    # A real PATH without cargo on it, not a mock.
    monkeypatch.setenv("PATH", str(tmp_path))
    result = runner.invoke(app, ["lint", str(CRATE / "src"), "--rustc", str(CRATE)])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: cargo not found: install Rust with rustup (https://rustup.rs) and re-run"

"""The engine: prefilter, parallel workers, and burn's own source tree."""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

import pytest

from burnside.lint import lint_paths, select_rules
from burnside.lint.engine import POOL_MIN_FILES, PREFILTER, needs_parsing
from tests.lint.fixture_findings import BUGS, FIXTURES, RUST

REPO = Path(__file__).resolve().parents[2]
BURN_SRC_VARIABLE = "BURNSIDE_BURN_SRC"  # another burn checkout to lint instead of the registry's copy
CARGO_REGISTRY_SRC = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo") / "registry" / "src"


def _tree(root: Path, copies: int) -> None:
    plain = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n" * 20
    for i in range(copies):
        directory = root / f"crate{i % 7}" / "src"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"plain{i}.rs").write_text(plain)
        if i % 10 == 0:
            shutil.copy(RUST / BUGS, directory / f"train{i}.rs")


def test_prefilter_only_parses_candidate_files(tmp_path):
    _tree(tmp_path, 40)
    report = lint_paths([tmp_path], select_rules(), root=tmp_path, jobs=1)
    assert report.files_seen == 44
    assert report.files_parsed == 4
    alone = lint_paths([RUST / BUGS], select_rules(), root=RUST, jobs=1)
    assert len(alone.findings) >= 5  # bugs.rs: BS001, BS002, BS003, BS004, BS005, and its optimizer defaults
    assert len(report.findings) == 4 * len(alone.findings)


def test_prefilter_tokens():
    tokens = (
        b"optim.step(",
        b"optim.step (",
        b"optim\n        .step(",
        b"optim.step::<M>(",
        b"from_grads",
        b"AdamConfig",
        b"AdamWConfig",
        b"MomentumConfig",
        b"with_momentum",
        b"GradientClippingConfig",
        b"GradientClipping",
        b"RmsPropConfig",
        b"AdaGradConfig",
        b"MuonConfig",
    )
    for token in tokens:
        source = b"fn f() { " + token + b" }"
        assert PREFILTER.search(source) and needs_parsing(source)
    # A `step` that is not a method call can never be a module step: not parsed.
    not_steps = (b"fn f() { let stepper = 1; }", b"fn step_size() {}", b"fn step(&mut self) {}", b"time_step(3)")
    for source in (*not_steps, b"Self::step(x)", b""):
        assert PREFILTER.search(source) is None and not needs_parsing(source)


def test_two_workers_give_the_same_findings_as_one(tmp_path):
    _tree(tmp_path, POOL_MIN_FILES + 50)
    one = lint_paths([tmp_path], select_rules(), root=tmp_path, jobs=1)
    two = lint_paths([tmp_path], select_rules(), root=tmp_path, jobs=2)
    assert one.files_seen == two.files_seen > POOL_MIN_FILES
    assert one.files_parsed == two.files_parsed
    assert one.findings == two.findings
    assert len(two.findings) > 0


def burn_crates_in_the_registry() -> tuple[list[Path], list[str]]:
    """The sources of the burn crates rust/Cargo.lock pins (``burn-0.22.1``, ``burn-optim-0.22.1``, ...), as
    cargo extracts them into ``$CARGO_HOME/registry/src/*/`` for any build of rust/, and the ones not there."""
    lock = tomllib.loads((REPO / "rust" / "Cargo.lock").read_text())
    wanted = sorted(f"{p['name']}-{p['version']}" for p in lock["package"]
                    if (p["name"] == "burn" or p["name"].startswith("burn-")) and "source" in p)
    found = {}
    for index in sorted(CARGO_REGISTRY_SRC.glob("*")):
        for name in wanted:
            if name not in found and (index / name / "Cargo.toml").is_file():
                found[name] = index / name
    return [found[name] for name in wanted if name in found], [name for name in wanted if name not in found]


def test_burn_source_tree_has_no_training_bug_findings():
    rules = select_rules(["BS001", "BS002", "BS003"])
    if checkout := os.environ.get(BURN_SRC_VARIABLE):
        root = Path(checkout)
        assert root.is_dir(), f"${BURN_SRC_VARIABLE} is {checkout!r}, not a directory"
        report = lint_paths([root], rules, root=root)
        assert report.files_seen > 1000  # a git checkout of burn: its crates, examples and tests
        assert report.files_parsed >= 40  # burn's optimizers, examples and tests that call `.step(`
    else:
        crates, missing = burn_crates_in_the_registry()
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            pytest.skip(f"burn's source is not in cargo's registry ({shown} not under {CARGO_REGISTRY_SRC}): "
                        f"`cargo fetch --manifest-path {REPO / 'rust' / 'Cargo.toml'}` (or any build of rust/) "
                        f"puts it there; or set ${BURN_SRC_VARIABLE} to a checkout of burn")
        names = [c.name for c in crates]
        assert len(names) == 30 and "burn-optim-0.22.1" in names, f"the figures below are burn 0.22.1's: {names}"
        report = lint_paths(crates, rules, root=crates[0].parent)
        # the 30 burn 0.22.1 crates rust/Cargo.lock pins (burn-capture and burn-router with the tap-free
        # recording), as measured: their .rs files, and the 31 the prefilter parses (`.step(`, `from_grads`,
        # an optimizer config), 27 of them burn-optim's: its optimizers and their tests
        assert report.files_seen == 939
        assert report.files_parsed == 31
        optim = lint_paths([c for c in crates if c.name == "burn-optim-0.22.1"], rules, root=crates[0].parent)
        assert (optim.files_seen, optim.files_parsed) == (40, 27)
    assert report.skipped == []
    assert [(f.rule, f.path, f.line) for f in report.findings] == []


# The nodes the rules start from, as a query over the whole tree finds them:
# the reference for the token-guided lookup the engine uses.
_REFERENCE_QUERY = """
((field_identifier) @step (#eq? @step "step"))
(scoped_identifier name: (identifier) @scoped (#any-of? @scoped "from_grads" "new"))
(struct_expression name: (type_identifier) @momentum (#eq? @momentum "MomentumConfig"))
(call_expression function: (scoped_identifier
    path: [(identifier) @clip_type (scoped_identifier name: (identifier) @clip_type)]
    name: (identifier) @clip (#eq? @clip "Norm"))
  (#any-of? @clip_type "GradientClippingConfig" "GradientClipping")) @clip_call
"""


def _reference_candidates(root) -> dict[str, list[tuple[int, int]]]:
    from tree_sitter import Query, QueryCursor

    from burnside.lint.syntax import _language, callee

    captures = QueryCursor(Query(_language(), _REFERENCE_QUERY)).captures(root)
    found: dict[str, list] = {"step_call": [], "scoped_call": [], "momentum_struct": [], "clip_norm": []}
    for name in captures.get("step", []):
        call = name.parent.parent
        if call is not None and call.type == "generic_function":
            call = call.parent
        is_call = call is not None and call.type == "call_expression"
        if name.parent.type == "field_expression" and is_call and callee(call) == name.parent:
            found["step_call"].append(call)
    for name in captures.get("scoped", []):
        call = name.parent.parent
        if call is not None and call.type == "call_expression" and call.child_by_field_name("function") == name.parent:
            found["scoped_call"].append(call)
    found["momentum_struct"] = [name.parent for name in captures.get("momentum", [])]
    found["clip_norm"] = captures.get("clip_call", [])
    return {k: sorted((n.start_byte, n.end_byte) for n in v) for k, v in found.items()}


def test_token_lookup_finds_what_a_whole_tree_query_finds():
    from burnside.lint.syntax import find_candidates, parser

    files = sorted(FIXTURES.rglob("*.rs")) + sorted(RUST.rglob("*.rs"))
    assert len(files) > 30
    total = 0
    for path in files:
        source = path.read_bytes()
        root = parser().parse(source).root_node
        found = {k: sorted((n.start_byte, n.end_byte) for n in v) for k, v in find_candidates(root, source).items()}
        assert found == _reference_candidates(root), path
        total += sum(len(v) for v in found.values())
    assert total > 100


def test_burn_source_tree_optimizer_defaults_are_the_real_ones():
    # BS008-BS010 on burn 0.22.1's published crates: each finding, read by hand, is a config whose
    # default reaches an optimizer that steps (burn's own resume tests, inside closures handed to
    # `assert_optimizer_resume`); every config there that sets the field, is only read for its
    # fields, or is loaded from a saved state and read back is left alone.
    crates, missing = burn_crates_in_the_registry()
    if missing:
        pytest.skip(f"burn's source is not in cargo's registry ({missing[0]} not under {CARGO_REGISTRY_SRC})")
    report = lint_paths(crates, select_rules(["BS008", "BS009", "BS010"]), root=crates[0].parent)
    assert report.files_parsed == 31  # the new rules' tokens add no file to the 31 parsed above
    assert [(f.rule, f.path, f.line, f.message.split(" left at")[0]) for f in report.findings] == [
        ("BS009", "burn-optim-0.22.1/src/optim/adagrad.rs", 178, "`AdaGradConfig` epsilon"),
        ("BS010", "burn-optim-0.22.1/src/optim/muon.rs", 505, "`MuonConfig` weight decay"),
        ("BS008", "burn-optim-0.22.1/src/optim/rmsprop.rs", 340, "`RmsPropConfig` epsilon"),
    ]

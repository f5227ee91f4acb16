"""Hostile inputs: time linear in file size, deep nesting reported, never passed over silently."""

from __future__ import annotations

import time

import pytest

from burnside.errors import BurnsideError
from burnside.lint import lint_paths, lint_source, select_rules
from burnside.lint.engine import MAX_NESTING, nesting_bound
from burnside.lint.syntax import GUARDED_SPLIT_BYTES, SPLIT_BYTES

_SMALL_FN = "fn f{i}(model: Mlp, grads: GradientsParams) {{\n    optim.step(0.1, model.clone(), grads);\n}}\n"
_PLAIN_FN = ("pub fn plain_{i}(values: &mut [f32]) {{\n    for v in values.iter_mut() {{\n"
             "        *v *= 2.0;\n    }}\n}}\n")


def _timed(source: bytes) -> tuple[float, list]:
    start = time.perf_counter()
    found = lint_source("x.rs", source, select_rules())
    return time.perf_counter() - start, found


def test_many_small_functions_scale_linearly():
    # BS003 used to compare every step with every other one in the file.
    small = "".join(_SMALL_FN.format(i=i) for i in range(1500)).encode()
    large = "".join(_SMALL_FN.format(i=i) for i in range(6000)).encode()
    t_small, found_small = _timed(small)
    t_large, found_large = _timed(large)
    assert len(found_small) == 1500 and len(found_large) == 6000
    assert {f.rule for f in found_large} == {"BS001"}
    # Four times the functions: about four times the time, far from sixteen.
    assert t_large < 8 * t_small + 0.5


def test_ten_thousand_nested_blocks_are_analysed():
    depth = 10_000
    source = ("fn f(model: Mlp, grads: GradientsParams) {\n" + "{" * depth
              + "optim.step(0.1, model.clone(), grads);" + "}" * depth + "\n}\n").encode()
    elapsed, found = _timed(source)
    assert [(f.rule, f.line) for f in found] == [("BS001", 2)]
    assert elapsed < 10


def test_nesting_too_deep_is_reported_not_passed(tmp_path):
    depth = 40_000
    path = tmp_path / "deep.rs"
    path.write_bytes(("fn f(model: Mlp, grads: GradientsParams) {\n" + "{" * depth
                      + "optim.step(0.1, model.clone(), grads);" + "}" * depth + "\n}\n").encode())
    report = lint_paths([path], select_rules(), root=tmp_path, jobs=1)
    assert report.findings == []
    [(shown, reason)] = report.skipped
    assert shown == "deep.rs"
    assert reason.startswith("syntax nested up to 80,")
    assert reason.endswith(f"levels deep, over the {MAX_NESTING:,} the linter can follow")
    with pytest.raises(BurnsideError, match="nested up to"):
        lint_source("deep.rs", path.read_bytes(), select_rules())


def test_nesting_bound_is_an_upper_bound_for_brackets_and_chains():
    filler = b"fn g() { let x = 1; }\n" * 20_000  # past the cheap screen, into the exact count
    nested = filler + b"fn f() {" + b"{" * 3000 + b"}" * 3000 + b"}"
    assert 2 * 3000 <= nesting_bound(nested) < 2 * 3000 + 100
    chain = filler + b"fn f() { let c = AdamConfig::new()" + b".with_beta_1(0.9)" * 30_000 + b".init(); }"
    assert nesting_bound(chain) >= 2 * 30_000


def test_ten_thousand_call_config_chain_is_fast():
    source = ("fn f() {\n    let optim = AdamConfig::new()" + ".with_beta_1(0.9)" * 10_000 + ".init();\n}\n").encode()
    elapsed, found = _timed(source)
    assert [(f.rule, f.line) for f in found] == [("BS004", 2)]
    assert elapsed < 10


def test_large_file_pieces_keep_line_numbers():
    # Above SPLIT_BYTES only the items holding a rule's token are parsed.
    plain = "".join(_PLAIN_FN.format(i=i) for i in range(SPLIT_BYTES // 60))
    before = plain.count("\n")
    training = (
        "fn train(model: Mlp, grads: GradientsParams) {\n"
        "    optim.step(0.1, model.clone(), grads);\n"
        "}\n"
        "fn adam() -> AdamConfig {\n"
        "    AdamConfig::new()\n"
        "}\n"
    )
    tail = "fn use_it() {\n    let o = adam().init();\n}\n"
    source = (plain + training + plain + tail).encode()
    assert len(source) > SPLIT_BYTES
    found = lint_source("big.rs", source, select_rules())
    lines = source.decode().splitlines()
    assert [(f.rule, f.line) for f in found] == [("BS001", before + 2), ("BS004", before + 5)]
    assert lines[before + 1].strip() == "optim.step(0.1, model.clone(), grads);"
    assert found[0].snippet == "    optim.step(0.1, model.clone(), grads);"
    # The config escapes its piece and is followed to the init at the end of the file.
    init_line = len(lines) - 1
    assert lines[init_line - 1].strip() == "let o = adam().init();"
    assert found[1].message.endswith(f"turned into an optimizer at line {init_line}")


def _mid_sized(training_fn: str) -> bytes:
    """Plain functions around one training function, past GUARDED_SPLIT_BYTES and below SPLIT_BYTES."""
    plain = "".join(_PLAIN_FN.format(i=i) for i in range(1500))
    source = (plain + training_fn + plain).encode()
    assert GUARDED_SPLIT_BYTES < len(source) <= SPLIT_BYTES
    return source


def _whole_file(source: bytes, monkeypatch) -> list:
    with monkeypatch.context() as patch:
        patch.setattr("burnside.lint.syntax.GUARDED_SPLIT_BYTES", SPLIT_BYTES)
        return lint_source("x.rs", source, select_rules())


def test_mid_sized_file_cut_into_items_finds_what_the_whole_file_gives(monkeypatch):
    training = (
        "// burnside: allow(BS004)\n"
        "fn train(mut model: Mlp, grads: GradientsParams) {\n"
        "    let mut optim = AdamConfig::new().init();\n"
        "    optim.step(0.1, model.clone(), grads);\n"
        "}\n"
    )
    source = _mid_sized(training)
    found = lint_source("x.rs", source, select_rules())
    assert [(f.rule, f.line, f.column) for f in found] == [("BS001", 7504, 5)]
    assert found == _whole_file(source, monkeypatch)


def test_a_cut_inside_a_raw_string_falls_back_to_the_whole_file(monkeypatch):
    # The `}` alone on its line inside the raw string looks like the end of an
    # item; the half after it does not parse, so the file is parsed whole (cut,
    # the step would lose its `#[test]` function and be reported as an error).
    training = (
        "#[test]\n"
        "fn train(mut model: Mlp, grads: GradientsParams) {\n"
        '    let shader = r#"\n'
        "fn main() {\n"
        "}\n"
        '"#;\n'
        "    optim.step(0.1, model.clone(), grads);\n"
        "    check(&model);\n"
        "}\n"
    )
    source = _mid_sized(training)
    found = lint_source("x.rs", source, select_rules())
    assert [(f.rule, f.line, f.severity.value) for f in found] == [("BS001", 7507, "warning")]
    assert found == _whole_file(source, monkeypatch)

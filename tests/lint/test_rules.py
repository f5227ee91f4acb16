"""Each rule on its bad and good fixture, the seed programs, and canonical burn loops."""

from __future__ import annotations

import pytest

from burnside.lint import lint_paths, lint_source, select_rules
from burnside.lint.finding import Severity
from tests.lint.fixture_findings import (
    BUGS,
    FIXTURES,
    HELPER,
    LINT,
    NOASSIGN,
    OTHERGRADS,
    RUST,
    TRAIN_STEP,
    at,
    findings_of,
)


def test_bs001_bad():
    assert findings_of("bs001_bad.rs", select=["BS001"]) == [
        ("BS001", 6, 5),  # expression statement
        ("BS001", 11, 13),  # let _ =
        ("BS001", 15, 9),  # _ =
        ("BS001", 19, 18),  # let _model =
        ("BS001", 24, 19),  # let updated = ..., never read
        ("BS001", 30, 9),  # self.optim split over two lines
        ("BS001", 35, 9),  # method-call receiver, grads built inline
        ("BS001", 43, 10),  # parenthesised, accumulator.grads()
        ("BS001", 48, 41),  # let _ = Some(..).map(|m| step)
        ("BS001", 52, 5),  # gradients through a helper: to_params(grads)
        ("BS001", 56, 5),  # turbofish step::<M>
        ("BS001", 61, 9),  # statement inside a for_each closure
        ("BS001", 66, 5),  # a `&mut` helper
    ]


def test_bs001_messages_name_the_discard_and_the_fix():
    report = lint_paths([FIXTURES / "bs001_bad.rs"], ["BS001"], root=FIXTURES, jobs=1)
    by_line = {f.line: f for f in report.findings}
    assert by_line[6].message == "result of optimizer step is discarded"
    assert by_line[6].help == "assign the updated module: `model = optim.step(0.1, model, grads);`"
    assert by_line[19].message.endswith("(`let _model =`)")
    assert by_line[24].message.endswith("(binding `updated` never read)")
    assert by_line[30].help == "assign the updated module: `self.model = self.optim.step(self.lr, self.model, grads);`"
    assert by_line[48].message.endswith("(`let _ =`, through `.map(..)`)")
    # in a `&mut M` helper the fix writes through the reference, and compiles
    assert by_line[66].help == "assign the updated module: `*model = optim.step(0.1, model.clone(), grads);`"
    assert all(f.severity is Severity.ERROR for f in report.findings)


def test_bs001_good():
    assert findings_of("bs001_good.rs") == []


def test_bs002_bad():
    assert findings_of("bs002_bad.rs") == [
        ("BS002", 8, 62),
        ("BS002", 16, 52),
        ("BS002", 23, 66),
        ("BS002", 31, 64),  # the generator reaches the loss only through .detach()
        ("BS002", 38, 66),  # q2 is in the loss, but q1 is stepped
        ("BS002", 49, 62),  # a frozen target keyed, the agent stepped (through a clipping `if`)
        ("BS002", 71, 66),  # frozen where the struct is built, stepped through `self`
        ("BS002", 81, 62),  # a target copy, not frozen, that reaches the loss only through .detach()
        ("BS002", 89, 50),  # a frozen copy's gradients returned, no step in sight
        ("BS002", 100, 71),  # frozen in another method, a different module stepped
    ]


def test_bs002_part_of_the_stepped_module():
    report = lint_paths([FIXTURES / "bs002_bad.rs"], ["BS002"], root=FIXTURES, jobs=1)
    by_line = {f.line: f for f in report.findings}
    assert by_line[49].message == (
        "gradients are taken against `model.target`, which is frozen (`.set_require_grad(false)` at line 46): "
        "there are none, so the step of `model` at line 51 changes nothing"
    )
    assert by_line[49].help == (
        "key the gradients to the stepped module: `GradientsParams::from_grads(loss.backward(), &model)`; "
        "its frozen part gets no gradients and stays as it is"
    )
    assert by_line[71].message == (
        "gradients are taken against `self.agent.target_net`, which is frozen (`.no_grad()` at line 64): "
        "there are none, so the step of `self.agent` at line 72 changes nothing"
    )
    assert by_line[81].message == (
        "gradients are taken against `model.target` only, a copy not meant to be trained, while `model` is "
        "stepped with them at line 82: `model.q`, which the loss trains, gets no update"
    )
    assert by_line[81].help == (
        "key the gradients to the stepped module: `GradientsParams::from_grads(loss.backward(), &model)`, "
        "and keep the copy out of training (`.no_grad()` on it, or `.detach()` on its output)"
    )
    assert by_line[89].message == (
        "gradients are taken against `target_net`, which is frozen (`.no_grad()` at line 87): "
        "there are none, and a step with them changes nothing"
    )
    assert by_line[89].help.endswith("`GradientsParams::from_grads(loss.backward(), &policy)`")
    assert by_line[100].message == (
        "gradients are taken against `self.target` (it is frozen, `.no_grad()` at line 95: there are none), "
        "but `self.online` is stepped with them at line 102"
    )


def test_bs002_names_the_stepped_module():
    report = lint_paths([FIXTURES / "bs002_bad.rs"], ["BS002"], root=FIXTURES, jobs=1)
    by_line = {f.line: f for f in report.findings}
    assert by_line[38].message == "gradients are taken against `self.q2`, but `self.q1` is stepped with them at line 39"
    assert by_line[31].message == "gradients are taken against `generator`, but the loss was built by `discriminator`"


def test_bs002_message_names_the_builder():
    report = lint_paths([FIXTURES / "bs002_bad.rs"], ["BS002"], root=FIXTURES, jobs=1)
    first = report.findings[0]
    assert first.severity is Severity.WARNING
    assert first.message == "gradients are taken against `other`, but the loss was built by `model`"
    assert "&model)" in first.help


def test_bs002_good():
    assert findings_of("bs002_good.rs") == []
    # The frozen module's gradients in the test module are a real BS002 outside test code.
    source = (FIXTURES / "bs002_good.rs").read_bytes().replace(b"#[cfg(test)]", b"").replace(b"#[test]", b"")
    found = [(f.rule, f.line) for f in lint_source("x.rs", source, ["BS002"])]
    assert found == [("BS002", source[: source.index(b"&model);\n        assert!")].count(b"\n") + 1)]


def test_bs003_bad():
    assert findings_of("bs003_bad.rs", select=["BS003"]) == [("BS003", 7, 5), ("BS003", 15, 17), ("BS003", 23, 13)]
    # The BS003 sites sit on top of BS001 sites: both rules fire together.
    assert findings_of("bs003_bad.rs", select=["BS001"]) == [("BS001", 6, 5), ("BS001", 15, 17), ("BS001", 22, 13)]


def test_bs003_good():
    assert findings_of("bs003_good.rs", select=["BS003"]) == []
    # The discarded steps in one match arm and one if branch are still BS001s.
    assert findings_of("bs003_good.rs") == [("BS001", 29, 21), ("BS001", 41, 9)]


def test_bs004_bad():
    assert findings_of("bs004_bad.rs") == [
        ("BS004", 5, 17),
        ("BS004", 6, 19),
        ("BS004", 9, 18),
        ("BS004", 14, 17),  # init::<B, Model<B>>()
        ("BS004", 26, 28),  # let, then a #[derive(Config)] constructor argument, inited in another fn
        ("BS004", 40, 25),  # struct literal field
        ("BS004", 48, 5),  # returned by a helper, inited by its caller
        ("BS004", 56, 15),  # `cfg` inited while only its clone got an epsilon
        ("BS004", 67, 24),  # passed to a function that inits its parameter
        ("BS004", 71, 21),  # the optimizer is lent as `&mut`: it can step
        ("BS004", 76, 17),  # lent shared: optimizers are Clone, the callee may step a clone
    ]


def test_bs004_names_the_init():
    report = lint_paths([FIXTURES / "bs004_bad.rs"], ["BS004"], root=FIXTURES, jobs=1)
    by_line = {f.line: f for f in report.findings}
    assert by_line[5].message == "`AdamConfig` epsilon left at burn's default 1e-5 (PyTorch uses 1e-8)"
    assert by_line[26].message.endswith("; turned into an optimizer at line 32")
    assert by_line[48].message.endswith("; turned into an optimizer at line 52")
    assert by_line[67].message.endswith("; turned into an optimizer at line 63")


def test_config_followed_across_files_of_a_crate():
    crate = FIXTURES / "config_crate"
    report = lint_paths([crate], select_rules(), root=crate, jobs=1)
    assert [(f.rule, f.path, f.line, f.column) for f in report.findings] == [("BS004", "src/main.rs", 8, 28)]
    assert report.findings[0].message.endswith("; turned into an optimizer at src/training.rs:18")
    # Linted alone, main.rs cannot see the init, so it says nothing.
    alone = lint_paths([crate / "src" / "main.rs"], select_rules(), root=crate, jobs=1)
    assert alone.findings == []


def test_bs006_bad():
    assert findings_of("bs006_bad.rs") == [("BS006", 5, 17), ("BS006", 9, 15), ("BS006", 14, 5)]


def test_bs006_good():
    assert findings_of("bs006_good.rs") == []
    # The allowed config is a real BS006 without its comment.
    source = (FIXTURES / "bs006_good.rs").read_bytes().replace(b"// burnside: allow(BS006)", b"")
    assert [(f.rule, f.line) for f in lint_source("x.rs", source, ["BS006"])] == [("BS006", 20)]


def test_bs004_good():
    assert findings_of("bs004_good.rs") == []


def test_bs005_bad():
    assert findings_of("bs005_bad.rs") == [("BS005", 6, 29), ("BS005", 8, 20), ("BS005", 15, 20)]


def test_bs005_good():
    assert findings_of("bs005_good.rs") == []


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        (NOASSIGN, [("BS001", 17, 5)]),
        (BUGS, [("BS004", *at(BUGS, "AdamConfig::new().init()")),
                ("BS005", *at(BUGS, "MomentumConfig::new().with_momentum(0.9))) // dampening 0.1")),
                ("BS002", *at(BUGS, "&other) // the bug")),
                ("BS001", *at(BUGS, "optim.step(lr, model.clone(), grads); // the bug")),
                ("BS003", *at(BUGS, "optim.step(lr, model.clone(), grads); // the bug"))]),
        (HELPER, [("BS001", 14, 5)]),
        (OTHERGRADS, [("BS002", 30, 62)]),
        (LINT, [("BS001", 16, 5)]),
        (TRAIN_STEP, []),
    ],
)
def test_seed_programs(fixture, expected):
    found = findings_of(fixture, root=RUST)
    # bugs.rs's optimizer-default bugs: test_optimizer_default_bugs_in_the_bugs_program
    assert [f for f in found if f[0] not in ("BS008", "BS009", "BS010")] == expected


def test_seed_helper_fix_writes_through_the_reference():
    report = lint_paths([RUST / HELPER], ["BS001"], root=RUST, jobs=1)
    assert report.findings[0].help == "assign the updated module: `*model = optim.step(0.1, model.clone(), grads);`"


def test_canonical_training_loops_are_clean():
    assert findings_of("canonical_loops.rs") == []


def test_bs007_bad():
    assert findings_of("bs007_bad.rs") == [("BS007", 8, 66), ("BS007", 12, 30), ("BS007", 16, 10)]
    report = lint_paths([FIXTURES / "bs007_bad.rs"], ["BS007"], root=FIXTURES, jobs=1)
    first = report.findings[0]
    assert first.severity is Severity.INFO
    assert first.message == (
        "`GradientClippingConfig::Norm(CLIP)` clips each parameter's gradient by its own norm; "
        "PyTorch's `clip_grad_norm_` scales all gradients by one norm taken over all of them"
    )
    assert first.help.startswith("to match `clip_grad_norm_(params, CLIP)`, leave burn's clipping off")


def test_bs007_good():
    assert findings_of("bs007_good.rs") == []
    # The same file ported from PyTorch: its one `Norm` call (not the match pattern) is reported.
    source = (FIXTURES / "bs007_good.rs").read_bytes()
    for mark in (b"// as torch.nn.utils.clip_grad_norm_ does\n", b"// ported from PyTorch\n",
                 b"use burnside_trace::Tap;\n"):
        assert ([(f.rule, f.line) for f in lint_source("x.rs", mark + source, ["BS007"])]
                == [("BS007", 8), ("BS007", 17)])


def test_regression_corpus_is_clean():
    report = lint_paths([FIXTURES / "regression"], select_rules(), root=FIXTURES, jobs=1)
    assert report.files_parsed == 5
    assert [(f.rule, f.path, f.line) for f in report.findings] == []


def test_regression_dqn_with_the_target_keyed():
    # The clean DQN with the mistake made while porting: gradients keyed to the target network.
    source = (FIXTURES / "regression" / "dqn_target_network.rs").read_bytes()
    wrong = source.replace(b"huber(q, y).backward(), &model)", b"huber(q, y).backward(), &model.target)")
    assert wrong != source
    found = lint_source("dqn.rs", wrong, select_rules())
    assert [(f.rule, f.line) for f in found] == [("BS002", 25)]
    assert found[0].message == (
        "gradients are taken against `model.target`, which is frozen (`.no_grad()` at line 13): "
        "there are none, so the step of `model` at line 27 changes nothing"
    )


def test_comments_strings_and_macro_bodies_are_not_code():
    assert findings_of("comments_strings.rs") == []
    # The same call outside those contexts is found, so the fixture can fail.
    source = (FIXTURES / "comments_strings.rs").read_bytes()
    source += b"\nfn real(model: Mlp, grads: GradientsParams) { optim.step(0.1, model.clone(), grads); }\n"
    found = lint_source("x.rs", source, select_rules())
    assert [(f.rule, f.line) for f in found] == [("BS001", source.count(b"\n"))]


def test_select_and_ignore():
    assert {r for r, _, _ in findings_of(BUGS, select=["BS004"], root=RUST)} == {"BS004"}
    assert (select_rules(ignore=["bs004", "BS005", "bs006", "bs007", "bs008", "BS009", "bs010"])
            == ["BS001", "BS002", "BS003"])


MOMENTUM_08 = "`RmsPropConfig` momentum left at burn's default 0.9 (PyTorch's RMSprop uses 0)"
EPSILON_08 = "`RmsPropConfig` epsilon left at burn's default 1e-5 (PyTorch's RMSprop uses 1e-8)"


def test_bs008_bad():
    report = lint_paths([FIXTURES / "bs008_bad.rs"], select_rules(), root=FIXTURES, jobs=1)
    assert [(f.rule, f.line, f.column, f.message.split(";")[0]) for f in report.findings] == [
        ("BS008", 5, 17, MOMENTUM_08),  # both defaults: one finding each
        ("BS008", 5, 17, EPSILON_08),
        ("BS008", 9, 17, MOMENTUM_08),
        ("BS008", 13, 15, EPSILON_08),  # through a shadowing `let`
        ("BS008", 26, 21, MOMENTUM_08),  # a #[derive(Config)] constructor argument, inited in another fn
        ("BS008", 39, 20, EPSILON_08),  # a struct literal field
        ("BS008", 47, 5, MOMENTUM_08),  # a helper's return value; its caller sets epsilon
        ("BS008", 55, 17, MOMENTUM_08),  # `.build()`, the bare optimizer for a parameter group
    ]
    by_line = {}
    for f in report.findings:
        by_line.setdefault(f.line, []).append(f)
    assert [f.help for f in by_line[5]] == [
        "set it explicitly to match PyTorch: `.with_momentum(0.0)`",
        "set it explicitly to match PyTorch: `.with_epsilon(1e-8)`",
    ]
    assert by_line[13][0].message.endswith("; turned into an optimizer at line 15")
    assert by_line[26][0].message.endswith("; turned into an optimizer at line 31")
    assert by_line[47][0].message.endswith("; turned into an optimizer at line 51")
    assert {f.severity for f in report.findings} == {Severity.INFO}


def test_bs008_good():
    assert findings_of("bs008_good.rs") == []
    # The allowed config is a real BS008 (momentum) without its comment.
    source = (FIXTURES / "bs008_good.rs").read_bytes().replace(b"// burnside: allow(BS008)", b"")
    assert [(f.rule, f.line, f.message) for f in lint_source("x.rs", source, ["BS008"])] == [
        ("BS008", 42, MOMENTUM_08)
    ]


def test_bs008_fix_silences_it():
    # Writing the fixes the findings give makes the file clean.
    source = (FIXTURES / "bs008_bad.rs").read_bytes()
    fixed = source.replace(b"RmsPropConfig::new()", b"RmsPropConfig::new().with_momentum(0.0).with_epsilon(1e-8)")
    assert lint_source("x.rs", source, ["BS008"]) != []
    assert lint_source("x.rs", fixed, ["BS008"]) == []


def test_bs009_bad():
    assert findings_of("bs009_bad.rs") == [
        ("BS009", 5, 17),
        ("BS009", 16, 15),  # a #[derive(Config)] constructor argument, inited in `run`
        ("BS009", 25, 5),  # returned by a helper, inited by its caller
        ("BS009", 34, 23),  # assigned to a field, inited through `self` in a method
    ]
    report = lint_paths([FIXTURES / "bs009_bad.rs"], ["BS009"], root=FIXTURES, jobs=1)
    first = report.findings[0]
    assert first.message == "`AdaGradConfig` epsilon left at burn's default 1e-5 (PyTorch's Adagrad uses 1e-10)"
    assert first.help == "set it explicitly to match PyTorch: `.with_epsilon(1e-10)`"
    assert report.findings[1].message.endswith("; turned into an optimizer at line 21")
    assert report.findings[3].message.endswith("; turned into an optimizer at line 44")


def test_bs009_good():
    assert findings_of("bs009_good.rs") == []


def test_bs010_bad():
    assert findings_of("bs010_bad.rs") == [
        ("BS010", 5, 17),
        ("BS010", 9, 18),  # `.build()` for a parameter group
        ("BS010", 14, 5),  # returned by a helper, inited by its caller
        ("BS010", 22, 21),  # a saved state loaded into it (`from_bytes(..).unwrap()`), then stepped
    ]
    report = lint_paths([FIXTURES / "bs010_bad.rs"], ["BS010"], root=FIXTURES, jobs=1)
    assert report.findings[0].message == ("`MuonConfig` weight decay left at burn's default none "
                                          "(PyTorch's Muon uses 0.1)")
    assert report.findings[0].help == (
        "set it explicitly to match PyTorch: `.with_weight_decay(Some(WeightDecayConfig::new(0.1)))`"
    )


def test_bs010_good():
    assert findings_of("bs010_good.rs") == []


def test_optimizer_defaults_followed_across_files_of_a_crate():
    crate = FIXTURES / "agent_crate"
    report = lint_paths([crate], select_rules(), root=crate, jobs=1)
    assert [(f.rule, f.path, f.line, f.column, f.message) for f in report.findings] == [
        ("BS008", "src/main.rs", 9, 18, MOMENTUM_08 + "; turned into an optimizer at src/agent.rs:13"),
        ("BS010", "src/main.rs", 11, 18,
         "`MuonConfig` weight decay left at burn's default none (PyTorch's Muon uses 0.1); "
         "turned into an optimizer at src/agent.rs:15"),
    ]
    alone = lint_paths([crate / "src" / "main.rs"], select_rules(), root=crate, jobs=1)
    assert alone.findings == []


def test_optimizer_default_bugs_in_the_bugs_program():
    # Each bug of `bugs --bug NAME` that builds an optimizer from burn's defaults (a port of
    # `torch.optim.RMSprop(params, lr)` written `RmsPropConfig::new().init()`) is flagged with its
    # rule, once per differing default, and nothing else in the program is.
    source = (RUST / BUGS).read_text().splitlines()
    expected = []
    for number, line in enumerate(source, 1):
        code = line.split("//")[0]
        for call, rules in (
            ("RmsPropConfig::new().init()", ["BS008", "BS008"]),
            ("AdaGradConfig::new().init()", ["BS009"]),
            ("MuonConfig::new().init()", ["BS010"]),
        ):
            if call in code:
                expected += [(rule, number, code.index(call) + 1) for rule in rules]
    found = findings_of(BUGS, select=["BS008", "BS009", "BS010"], root=RUST)
    assert found == sorted(expected, key=lambda f: (f[1], f[2], f[0]))

"""The prefilter is built from the tokens each lint rule declares (`burnside.lint.prefilter`)."""

from burnside.lint.engine import PREFILTER, needs_parsing
from burnside.lint.prefilter import MethodCall, build
from burnside.lint.rules import RULES


def test_every_rule_declares_its_tokens() -> None:
    for rule in RULES.values():
        assert rule.TOKENS and all(isinstance(t, (bytes, MethodCall)) for t in rule.TOKENS), rule.ID


def test_the_plan_scans_once_per_stem() -> None:
    """Tokens a rule declares together share one scan for their stem when no other rule's token holds it: seven
    plain scans and one for `step`, as the hand-written plan had."""
    plan = build(RULES.values())
    assert [name for name, _ in plan.calls] == [b"step"]
    assert [stem for stem, _ in plan.plain] == [b"from_grads", b"Adam", b"omentum", b"GradientClipping",
                                                 b"RmsPropConfig", b"AdaGradConfig", b"MuonConfig"]


def test_a_rule_s_token_alone_is_parsed() -> None:
    for rule in RULES.values():
        for token in rule.TOKENS:
            source = b"fn f() { x." + token.name + b"(1); }" if isinstance(token, MethodCall) else b"fn f() { " + \
                token + b" }"
            assert PREFILTER.search(source) and needs_parsing(source), (rule.ID, token)

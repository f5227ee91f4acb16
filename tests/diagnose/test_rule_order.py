"""The diagnosis rules' order, derived from what each rule declares, is the order the rules were listed in by hand."""

from burnside.diagnose.rules import RULES

#: The order `diagnose/rules/__init__.py` listed the rules in before each rule declared its precedence.
LISTED = ("D006", "D014", "D016", "D007", "D013", "D008", "D015", "D018", "D017", "D010", "D011", "D002", "D012",
          "D001", "D003", "D021", "D004", "D005", "D009", "D019", "D020")


def test_derived_order_is_the_listed_order() -> None:
    assert tuple(rule.ID for rule in RULES) == LISTED


def test_every_rule_declares_its_own_precedence() -> None:
    precedences = [rule.PRECEDENCE for rule in RULES]
    assert all(isinstance(p, int) for p in precedences)
    assert len(set(precedences)) == len(precedences)  # no tie left to the ID to break

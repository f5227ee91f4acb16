"""What a lint run reports: a `Finding` at a source span, with a `Severity`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from burnside.rule import Severity


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem at a span; lines and columns are 1-based, columns count characters."""

    rule: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    help: str
    source: str = "burnside"
    # The finding's first source line, for the caret display; not part of json/sarif.
    snippet: str = ""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["severity"] = self.severity.value
        del data["snippet"]
        return data

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.rule)


@dataclass(frozen=True, slots=True)
class Hit:
    """What a rule reports before the engine applies suppression and test-code severity."""

    node: object  # the tree-sitter node the finding points at
    message: str
    help: str
    # A config that leaves its file (burnside.lint.config_flow.PendingConfig): the
    # engine reports it only if the crate-wide pass finds an init without the setter.
    pending: object = None

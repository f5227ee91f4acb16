"""The code blocks of burnside's documents, and which test runs each.

A block is run by a test (`CLAIMS`: the test, and how) or carries a marker on the line just before its opening
fence saying why it cannot run: ``<!-- not run: reason -->`` (an output listing, the install command, the whole
conformance suite). `test_every_block_runs_or_says_why` holds every block to one or the other.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The documents whose blocks are tested, relative to the checkout.
DOCUMENTS = sorted(
    ["README.md", "rust/README.md", "rust/burnside-trace/README.md"]
    + [str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")]
    + [str(p.relative_to(ROOT)) for p in (ROOT / "src/burnside/templates").glob("*/README*")]
)

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_MARKER = re.compile(r"^\s*<!--\s*not run:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its document, the line of its opening fence (1-based), its language and text (the
    fence's indentation removed), and the reason of its `not run` marker (None without one)."""

    path: str
    line: int
    lang: str
    text: str
    not_run: str | None

    @property
    def first_line(self) -> str:
        return next((line for line in self.text.splitlines() if line.strip()), "")

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.lang or 'no language'}: {self.first_line.strip()[:60]!r})"


def blocks(path: str) -> list[Block]:
    """Every fenced block of the document at ``path`` (relative to the checkout)."""
    lines = (ROOT / path).read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence, lang = opened.group(1), opened.group(2), opened.group(3).strip()
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(fence[0] * len(fence)) and not lines[j].strip().strip(fence[0])),
                   None)
        if end is None:
            raise AssertionError(f"{path}:{i + 1}: a code block that is never closed")
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end]]
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(before)
        found.append(Block(path, i + 1, lang, "\n".join(body) + "\n", marker.group(1) if marker else None))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in DOCUMENTS for block in blocks(path)]


def dangling_markers(path: str) -> list[int]:
    """Lines of `not run` markers not followed (after blank lines) by an opening fence."""
    lines = (ROOT / path).read_text(encoding="utf-8").split("\n")
    openings = {b.line - 1 for b in blocks(path)}
    bad = []
    for i, line in enumerate(lines):
        if _MARKER.match(line):
            nxt = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
            if nxt not in openings:
                bad.append(i + 1)
    return bad


@dataclass(frozen=True)
class Claim:
    """A block a test runs: its document, language and first line (a prefix of it), and how it is run."""

    path: str
    lang: str
    first: str
    how: str

    def matches(self, block: Block) -> bool:
        return block.path == self.path and block.lang == self.lang and block.first_line.startswith(self.first)


def block(path: str, lang: str, first: str) -> Block:
    """The one block of ``path`` in ``lang`` whose first line starts with ``first``."""
    found = [b for b in blocks(path) if Claim(path, lang, first, "").matches(b)]
    assert len(found) == 1, f"{path}: {len(found)} {lang} blocks start with {first!r}"
    return found[0]


README_PORT = ("README.md", "bash", "burnside new myport && cd myport")
README_INFERENCE = ("README.md", "bash", "burnside new myinfer --inference && cd myinfer")

#: Every block a test runs. Rust blocks are compiled in one crate (test_rust_blocks.py, `RUST` there gives each
#: fragment what it needs in scope).
CLAIMS = [
    Claim(*README_PORT, "test_shell_blocks: run by bash in an empty folder; check must say OK"),
    Claim(*README_INFERENCE, "test_shell_blocks: run by bash in an empty folder; check must say OK"),
    Claim("src/burnside/templates/port/README.md", "bash", "python record.py",
          "test_shell_blocks: the README `burnside new` writes holds these commands, which README.md's port block "
          "runs in that project"),
    Claim("src/burnside/templates/inference/README.md", "bash", "python record.py",
          "test_shell_blocks: the README `burnside new --inference` writes holds these commands, which README.md's "
          "inference block runs in that project"),
    Claim("src/burnside/templates/generate/README.md", "bash", "python record.py",
          "tests/burn/test_new_port.py: `burnside new --generate`, then these two commands in that project; check "
          "must say OK"),
    Claim("rust/README.md", "bash", 'python -c "from burnside.burn.locate import trace_crate',
          "test_shell_blocks: run by bash; it prints burnside-trace's folder"),
    Claim("rust/README.md", "toml", "[profile.release]",
          "test_shell_blocks: the profile of the Cargo.toml `burnside new` writes, and of burnside's workspace"),
    Claim("docs/compare.md", "toml", "# tol.toml: burnside compare A B --tolerances tol.toml",
          "test_shell_blocks: written as tol.toml and compared with, on the port README.md's block checked"),
    Claim("docs/conformance.md", "bash", "burnside conformance --list",
          "test_shell_blocks: run by bash in an empty folder"),
    Claim("docs/lint.md", "console", "$ burnside lint rust/train-one/src/bin/noassign.rs",
          "test_shell_blocks: each `$` command run in the checkout, its output as shown"),
    Claim("docs/lint.md", "rust", "optim.step(0.1, model.clone(), grads); // burnside: allow(BS001)",
          "test_shell_blocks: `burnside lint` finds nothing in it, every finding allowed"),
    Claim("docs/lint.md", "yaml", "name: burnside lint",
          "test_shell_blocks: its `burnside lint` steps run in a copy of the checkout's rust/ (not the install "
          "and the actions)"),
    Claim("README.md", "rust", "Training::new(OptimizerSpec::adamw(3e-4)", "test_rust_blocks: compiled"),
    Claim("README.md", "rust", "let device = Device::default();", "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "use burn::nn::loss::CrossEntropyLossConfig;", "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "fn forward(&self, x: Tensor<4>, mut tap: Tap)", "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "let names = TorchNames::new()", "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "let mask = init.buffer(", "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "let spec = OptimizerSpec::adamw(1e-3);", "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "use burn::store::{ModuleSnapshot, PytorchStore};", "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "let model = burnside_trace::load_pytorch_checkpoint(",
          "test_rust_blocks: compiled"),
    Claim("rust/README.md", "rust", "Inference::new().run(&args, &init, &device, &model, |model, batch| {",
          "test_rust_blocks: compiled"),
    Claim("rust/burnside-trace/README.md", "rust", "use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Training};",
          "test_rust_blocks: compiled"),
]


def commands(text: str) -> list[str]:
    """A shell block's commands: continuation lines joined, comments and blank lines dropped, words normalised."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            found.append(shlex.join(words))
    return found

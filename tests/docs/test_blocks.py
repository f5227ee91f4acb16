"""Every code block of the documents runs in a test or says why it cannot (`blocks.py`); and what the documents
state that the code decides (burn's feature list) is the code's. Reads files only: well under a second."""

from __future__ import annotations

import re
import tomllib

from tests.docs.blocks import CLAIMS, DOCUMENTS, ROOT, all_blocks, dangling_markers


def test_the_documents_are_found():
    assert {"README.md", "rust/README.md", "rust/burnside-trace/README.md", "docs/compare.md", "docs/trace-format.md",
            "src/burnside/templates/port/README.md", "src/burnside/templates/inference/README.md"} <= set(DOCUMENTS)


def test_every_block_runs_or_says_why():
    problems = []
    for found in all_blocks():
        claims = [claim for claim in CLAIMS if claim.matches(found)]
        if found.not_run is not None and claims:
            problems.append(f"{found}: run by a test ({claims[0].how}) and marked `not run`")
        elif found.not_run is not None and not found.not_run:
            problems.append(f"{found}: a `not run` marker with no reason")
        elif found.not_run is None and not claims:
            problems.append(f"{found}: run by no test and not marked `<!-- not run: reason -->`")
        elif len(claims) > 1:
            problems.append(f"{found}: claimed by {len(claims)} tests")
    assert not problems, "\n".join(problems)


def test_every_claim_is_a_block_and_every_marker_marks_one():
    blocks = all_blocks()
    stale = [f"{c.path}: no {c.lang} block starts with {c.first!r}" for c in CLAIMS
             if not any(c.matches(b) for b in blocks)]
    dangling = [f"{path}:{line}: a `not run` marker before no code block"
                for path in DOCUMENTS for line in dangling_markers(path)]
    assert not stale + dangling, "\n".join(stale + dangling)


#: `features = ["std", ...]` as the documents and manifests write burn's features.
_FEATURES = re.compile(r'features\s*=\s*\[([^\]]*)\]')


def test_every_burn_feature_list_the_documents_give_is_the_workspaces():
    # a port built with fewer features than burnside's build rebuilds burn (minutes) instead of reusing it
    manifest = tomllib.loads((ROOT / "rust/Cargo.toml").read_text())
    workspace = manifest["workspace"]["dependencies"]["burn"]["features"]
    template = (ROOT / "src/burnside/templates/port/Cargo.toml.in").read_text()
    lists = {"src/burnside/templates/port/Cargo.toml.in": template,
             "src/burnside/templates/inference/Cargo.toml.in":
                 (ROOT / "src/burnside/templates/inference/Cargo.toml.in").read_text()}
    lists |= {path: (ROOT / path).read_text() for path in DOCUMENTS}
    found = 0
    for path, text in lists.items():
        flat = re.sub(r"\s+", " ", text)
        for match in _FEATURES.finditer(flat):
            features = re.findall(r'"([^"]+)"', match.group(1))
            if "flex" not in features:
                continue  # another crate's features
            found += 1
            assert features == workspace, f"{path}: burn's features {features}, the workspace's {workspace}"
    assert found >= 4


def _commands(prefix: str) -> list[tuple[str, str]]:
    """(document, command) for every command starting with ``prefix`` the documents give: in backticks in the
    text, and each line of their shell and console blocks."""
    found = []
    for path in DOCUMENTS:
        spans = re.findall(r"`([^`\n]+)`", (ROOT / path).read_text())
        spans += [line.removeprefix("$ ") for b in all_blocks() if b.path == path and b.lang in ("bash", "console")
                  for line in b.text.splitlines()]
        found += [(path, span.strip()) for span in spans if span.strip().startswith(prefix)]
    return found


def test_every_burnside_command_the_documents_give_has_its_subcommand_and_options():
    import click

    from burnside.cli.root import app

    ctx = click.Context(app)

    def options(command: click.Command) -> set[str]:
        return {"--help", "-h"} | {o for p in command.params if isinstance(p, click.Option)
                                   for o in [*p.opts, *p.secondary_opts]}

    problems, seen = [], 0
    for path, span in _commands("burnside "):
        name, _, rest = span.removeprefix("burnside ").partition(" ")
        if name[:1].isdigit():  # a version, `burnside 0.1.0`
            continue
        if name.startswith("-"):  # `burnside --version`
            problems += [f"{path}: `{span}`: burnside has no option {name}"] if name not in options(app) else []
            continue
        command = app.get_command(ctx, name)
        if command is None:
            problems.append(f"{path}: `{span}`: burnside has no command {name}")
            continue
        seen += 1
        rest = rest.split(" -- ")[0].split(" #")[0]  # the port's own arguments; a comment
        if isinstance(command, click.Group):
            sub, _, after = rest.strip().partition(" ")
            if command.get_command(ctx, sub) is not None:
                command, rest = command.get_command(ctx, sub), after
        problems += [f"{path}: `{span}`: {name} has no option {option}"
                     for option in re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", rest)
                     if option not in options(command)]
    assert seen > 50 and not problems, "\n".join(problems)


def test_every_benchmark_the_documents_name_exists_with_the_options_shown():
    # the benchmarks themselves take minutes: they are run by hand, their figures written down
    problems = []
    for path, span in _commands("python benchmarks/"):
        script = ROOT / span.split()[1]
        if not script.is_file():
            problems.append(f"{path}: `{span}`: no {script.relative_to(ROOT)}")
            continue
        source = script.read_text()
        problems += [f"{path}: `{span}`: {script.name} has no option {option}"
                     for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span) if f'"{option}"' not in source]
    assert not problems, "\n".join(problems)

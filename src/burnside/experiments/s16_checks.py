"""S16: the page's three checks, run against burnside's own burn programs."""

from __future__ import annotations

import re

from burnside.experiments import Context, Experiment, ExperimentResult

#: A1 has four parameter tensors; a training step's GradientsParams must hold all of them.
A1_PARAMS = 4
_STEP = re.compile(r"\boptim\.step\(")
_ASSIGNED = re.compile(r"(^|[^=!<>])=\s*optim\.step\(")


def step_sites(root) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(`optim.step(` lines with an assignment on their left, those without) under ``root``."""
    assigned, bare = set(), set()
    for path in sorted(root.rglob("*.rs")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            if _STEP.search(code):
                (assigned if _ASSIGNED.search(code) else bare).add((path.relative_to(root).as_posix(), number))
    return assigned, bare


def run(ctx: Context) -> ExperimentResult:
    """grads.len() == 4, the first losses, and an assignment left of every `optim.step(`."""
    from burnside.burn.binary import expect_panic
    from burnside.burn.locate import rust_workspace
    from burnside.burn.programs import built_programs, run_program
    from burnside.lint import lint_paths, select_rules

    console = ctx.console if ctx.progress else None
    rust = rust_workspace()
    out = ctx.console.print

    # 1. debug_assert_eq!(grads.len(), 4): in the training programs, and live in their builds.
    sources = [rust / "pitb-opt/src/lib.rs", rust / "train-step/src/main.rs", rust / "pitb-opt/src/bin/othergrads.rs"]
    # the count is 4, or the parameters the run trains (train-step's Muon freezes the biases): rustfmt may wrap it
    asserting = [p for p in sources
                 if re.search(r"debug_assert_eq!\(\s*grads\.len\(\),\s*(4|trained)\b", p.read_text())]
    good_len = run_program("moves", console=console).json["grads_len"]
    out(f"1. debug_assert_eq!(grads.len(), {A1_PARAMS}) in "
        f"{', '.join(p.relative_to(rust).as_posix() for p in asserting)}")
    out(f"   a correct step: grads.len() = {good_len}; othergrads --checked (gradients paired with another model):")
    panic = expect_panic(built_programs(console).executables["othergrads"], ["--checked"])
    out(panic, markup=False)
    caught = "assertion `left == right` failed" in panic and "left: 0" in panic and "right: 4" in panic

    # 2. The first losses: bit-identical means no update landed.
    sgd = run_program("discard", ["sgd"], console=console).json
    stuck = {name: len(set(sgd[f"{name}_bits"])) == 1 for name in ("clone", "fixed")}
    out(f"2. first losses, clone version {sgd['clone']} → no update landed: {stuck['clone']}")
    out(f"   first losses, fixed version {sgd['fixed']} → no update landed: {stuck['fixed']}")

    # 3. Every optim.step( has an assignment on its left: a plain text scan and `burnside lint` (BS001).
    assigned, bare = step_sites(rust / "pitb-opt/src")
    report = lint_paths([rust / "pitb-opt/src"], select_rules(["BS001"]), root=rust / "pitb-opt/src")
    flagged = {(f.path, f.line) for f in report.findings}
    out("3. optim.step( without an assignment on its left:")
    for path, line in sorted(bare):
        out(f"   pitb-opt/src/{path}:{line}  burnside lint BS001: {'flagged' if (path, line) in flagged else 'missed'}")
    out(f"   with an assignment: {', '.join(f'{p}:{n}' for p, n in sorted(assigned))}")
    return ExperimentResult(
        claims=[
            (f"the training programs assert grads.len() == {A1_PARAMS}", len(asserting) == len(sources)),
            (f"the check passes a correct step (grads.len() = {good_len})", good_len == A1_PARAMS),
            ("the check stops the mismatched gradients: assertion failed, left: 0, right: 4", caught),
            ("the first losses expose the clone version and pass the fixed one",
             stuck["clone"] and not stuck["fixed"]),
            (f"burnside lint flags exactly the {len(bare)} optim.step( calls with no assignment on their left",
             bool(bare) and flagged == bare and not flagged & assigned),
        ],
    )


EXPERIMENT = Experiment("S16", "the checks: grads.len(), first losses, an assignment left of optim.step(", "001",
                        ("burn",), run)

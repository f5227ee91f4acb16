"""S15: pitb-opt `lint`, rustc's allow-by-default `unused_results` lint catches the dropped step."""

from __future__ import annotations

from burnside.experiments import Context, Experiment, ExperimentResult


def run(ctx: Context) -> ExperimentResult:
    """With `#![warn(unused_results)]`, the discarded `optim.step(..)` is a warning naming `Mlp`."""
    from burnside.burn.programs import built_programs

    build = built_programs(ctx.console if ctx.progress else None)
    warnings = build.warnings("lint")
    for w in warnings:
        ctx.console.print(w.rendered.rstrip(), markup=False, highlight=False)
    hit = [w for w in warnings if w.code == "unused_results" and "unused result of type `Mlp`" in w.message]
    return ExperimentResult(
        claims=[
            ("rustc warns `unused result of type `Mlp`` on the discarded step", bool(hit)),
            ("the warning points at the `optim.step(` line",
             any(w.line is not None and "optim.step(" in _line(w) for w in hit)),
        ],
    )


def _line(warning) -> str:
    from burnside.burn.locate import rust_workspace

    source = (rust_workspace() / warning.file).read_text().splitlines()
    return source[warning.line - 1]


EXPERIMENT = Experiment("S15", "pitb-opt lint: #![warn(unused_results)]", "001", ("burn",), run)

"""The conformance table: on the terminal, as JSON, as a self-contained HTML page and as Markdown (README)."""

from __future__ import annotations

import datetime
import html
import json
import math
import platform
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from burnside.conformance.suite import CaseResult, summary

#: How each verdict is shown, in the summary's order.
VERDICTS = {
    "same": ("same", "green"),
    "framework": ("framework difference", "yellow"),
    "default": ("different default", "magenta"),
    "difference": ("difference", "red"),
    "not comparable": ("not comparable", "dim"),
}


def versions() -> dict[str, str]:
    """What the table was measured on."""
    import numpy
    import torch

    from burnside import __version__

    return {"burnside": __version__, "burn": "0.22.1", "torch": torch.__version__.split("+")[0],
            "numpy": numpy.__version__, "python": platform.python_version(),
            "date": datetime.date.today().isoformat()}


def relative(value: float | None) -> str:
    """A worst relative error, e.g. ``1.2e-07`` (``-`` when not measured)."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "NaN"
    return "0" if value == 0 else f"{value:.1e}"


def detail(result: CaseResult) -> str:
    """What the verdict rests on: the cause (and fix), or where burn is off."""
    text = result.detail
    if result.verdict == "difference" and result.first:
        text = f"first off at {result.first}: {text}"
    if result.fix:
        text += f"; fix: {result.fix}"
    return text


def summary_line(results: Sequence[CaseResult]) -> str:
    """``61 cases: 48 same (12 bit-identical), 3 framework differences, ...``."""
    counts = summary(results)
    exact = sum(1 for r in results if r.verdict == "same" and r.detail == "bit-identical")
    parts = []
    for key, (label, _) in VERDICTS.items():
        n = counts.get(key, 0)
        if not n:
            continue
        plural = label if n == 1 or label.endswith("same") or label == "not comparable" else label + "s"
        parts.append(f"{n} {plural}" + (f" ({exact} bit-identical)" if key == "same" and exact else ""))
    return f"{len(results)} case{'s' if len(results) != 1 else ''}: " + ", ".join(parts)


def render_table(results: Sequence[CaseResult], console: Console) -> None:
    """The table, each finding's cause and fix below it, and the summary, on ``console``."""
    wide = console.width >= 120  # room for the configuration column
    table = Table(show_lines=False, header_style="bold")
    table.add_column("case", no_wrap=True)
    if wide:
        table.add_column("configuration", overflow="fold")
    table.add_column("verdict", no_wrap=True)
    table.add_column("PyTorch err", justify="right", no_wrap=True)
    table.add_column("burn err", justify="right", no_wrap=True)
    for r in results:
        label, style = VERDICTS[r.verdict]
        if r.verdict == "same":
            label = f"same ({r.detail})"
        cells = [r.case.id, *([r.case.title] if wide else []), Text(label, style=style), relative(r.rel_torch),
                 relative(r.rel_burn)]
        table.add_row(*cells)
    console.print(table)
    console.print(Text("err: each side's worst distance to the float64 run, over the tensor's largest |value|",
                       style="dim"))
    findings = [r for r in results if r.verdict != "same"]
    for r in findings:
        label, style = VERDICTS[r.verdict]
        line = Text()
        line.append(f"{r.case.id}", style="bold")
        line.append(f" {label}: ", style=style)
        line.append(detail(r))
        console.print(line)
    console.print(Text(summary_line(results), style="bold"))


def results_json(results: Sequence[CaseResult]) -> str:
    """The suite's results as one JSON document."""
    return json.dumps({"versions": versions(), "summary": summary(results),
                       "cases": [r.to_dict() for r in results]}, indent=2)


def markdown(results: Sequence[CaseResult], *, findings_only: bool = False) -> str:
    """The table as Markdown, headed by what it was measured on (docs/conformance.md); with ``findings_only``, only
    the cases that are not the same (the README's table)."""
    v = versions()
    lines = [f"Measured {v['date']} with burn {v['burn']}, PyTorch {v['torch']}, burnside {v['burnside']}: "
             f"{summary_line(results)}.", "",
             "| case | configuration | verdict | PyTorch rel. err | burn rel. err | cause |",
             "|---|---|---|---|---|---|"]
    for r in results:
        if findings_only and r.verdict == "same":
            continue
        cells = [f"`{r.case.id}`", r.case.title, VERDICTS[r.verdict][0], relative(r.rel_torch), relative(r.rel_burn),
                 detail(r) if r.verdict != "same" else r.detail]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


_COLOURS = {"same": "#1a7f37", "framework": "#9a6700", "default": "#8250df", "difference": "#cf222e",
            "not comparable": "#6e7781"}


def html_page(results: Sequence[CaseResult]) -> str:
    """A self-contained page: what it was measured on, the summary, and every case."""
    v = versions()
    rows = []
    for r in results:
        label = VERDICTS[r.verdict][0]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (r.case.id, r.case.title)) +
                    f'<td style="color:{_COLOURS[r.verdict]};font-weight:600">{html.escape(label)}</td>' +
                    "".join(f'<td class="n">{html.escape(relative(x))}</td>' for x in (r.rel_torch, r.rel_burn)) +
                    f"<td>{html.escape(detail(r) if r.verdict != 'same' else r.detail)}</td></tr>")
    measured = ", ".join(f"{k} {html.escape(str(x))}" for k, x in v.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>burnside conformance</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #1f2328; }}
table {{ border-collapse: collapse; font-size: 14px; }}
th, td {{ border-bottom: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }}
td.n {{ font-family: ui-monospace, monospace; text-align: right; white-space: nowrap; }}
th {{ background: #f6f8fa; position: sticky; top: 0; }}
</style></head><body>
<h1>burn against PyTorch: conformance</h1>
<p>{html.escape(summary_line(results))}.</p>
<p>Each case is trained on the same weights and data in burn and PyTorch and judged with a float64 run as referee:
relative errors are each side's worst distance to the float64 run, over its scale.</p>
<p style="color:#6e7781">Measured with {measured}.</p>
<table><thead><tr><th>case</th><th>configuration</th><th>verdict</th><th>PyTorch rel. err</th>
<th>burn rel. err</th><th>cause / where</th></tr></thead><tbody>
{chr(10).join(rows)}
</tbody></table></body></html>
"""

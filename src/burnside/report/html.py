"""The HTML parity report: one self-contained page (styles and plots embedded, no scripts, no network)
that a person opens and understands in a minute.

Top to bottom: the verdict; what it rests on (structure problems, the first divergence, framework
differences, the diagnoses with their fixes); the plots; both sides' metadata side by side; the
per-tensor table in pipeline order, collapsed by step and stage. It holds summaries and plots, never
tensor data, so a report of a multi-GB trace pair stays small.
"""

from __future__ import annotations

import base64
import datetime
import json
from dataclasses import dataclass
from html import escape
from pathlib import Path

from burnside import __version__
from burnside.atomic import write_atomic
from burnside.compare import Comparison, StatisticsRow, TensorRow
from burnside.compare.statistics_rows import NOT_JUDGED, OUT_OF_TOLERANCE
from burnside.diagnose import Diagnosis
from burnside.errors import BurnsideError
from burnside.forensics import evidence_of
from burnside.report.distribution import difference_histogram, reference_losses
from burnside.report.plot import (
    activations_axis,
    drift_axis,
    figure_png,
    histogram_axis,
    loss_axis,
    reference_axis,
)
from burnside.report.table import (
    by_stage,
    finding_lines,
    shown_max_abs,
    shown_ulps,
    stage_of,
    structure_lines,
    times,
    tolerances_text,
)
from burnside.trace import parse_name

#: A comparison with at most this many rows shows every step and stage open.
OPEN_ROWS = 150
#: Metadata that names the side itself: expected to differ, so not highlighted.
_SIDE_KEYS = frozenset({"path", "framework", "framework_version", "recorder", "device"})
#: Metadata only PyTorch's recorder writes (burn's knows no module classes or model name): absent on
#: the burn side by nature, so not highlighted there.
_PYTORCH_ONLY_KEYS = frozenset({"modules", "model"})
#: A metadata value longer than this (as JSON) is folded.
FOLD_CHARS = 160

_STYLE_CLASS = {"bold yellow": "warn", "yellow": "warn", "red": "bad", "bold red": "bad", "cyan": "info",
                "green": "good", "dim": "dim"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;padding:0 20px 40px;
color:#1d2330;background:#fff}
h1{font-size:22px;margin:22px 0 2px}\
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2ea;padding-bottom:4px}
.sides{color:#555;font-size:13px;margin:0 0 12px}.mono,td.name,code{font-family:ui-monospace,Menlo,Consolas,monospace}
#verdict{border-radius:8px;padding:14px 18px;display:flex;gap:22px;align-items:center;flex-wrap:wrap}
#verdict.ok{background:#e7f6ec;border:1px solid #9fd6b0}#verdict.fail{background:#fdecec;border:1px solid #f0a8a8}
#verdict .word{font-size:34px;font-weight:700;letter-spacing:1px}#verdict.ok .word{color:#16803c}
#verdict.fail .word{color:#c0262d}#verdict .facts{font-size:13px}#verdict .facts div{margin:2px 0}
ul.findings{padding-left:18px}ul.findings li{margin:4px 0}li.warn{color:#8a5a00}li.bad{color:#b3261e}
li.info{color:#0b6477}li.good{color:#16803c}li.dim{color:#777}
.diagnosis{border-left:4px solid #8e44ad;background:#f7f1fa;padding:8px 12px;margin:8px 0;border-radius:0 6px 6px 0}
.diagnosis .fix{margin-top:4px}.diagnosis .rule{font-weight:700;color:#6c2f8a}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:14px}
figure{margin:0;border:1px solid #e3e6ec;border-radius:6px;padding:6px}figure img{width:100%;height:auto;display:block}
figcaption{font-size:12px;color:#555;padding:4px 2px 0}
table{border-collapse:collapse;width:100%;font-size:12.5px}th,td{padding:3px 7px;border-bottom:1px solid #eef0f4;
text-align:right;white-space:nowrap}th{background:#f4f6f9;position:sticky;top:0}td.name,th.name{text-align:left}
td.val{text-align:left;white-space:normal;word-break:break-word;font-family:ui-monospace,Menlo,Consolas,monospace}
tr.fail td{background:#fdecec}tr.noise td{background:#fff8e1}tr.first td{background:#f9c9c9;font-weight:600}
tr.differs td{background:#fff3cd}
details{margin:4px 0}details>summary{cursor:pointer;padding:4px 6px;border-radius:4px;background:#f4f6f9}
details.stage{margin-left:18px}summary .bad{color:#b3261e;font-weight:600}summary .good{color:#16803c}
.note{color:#666;font-size:13px}footer{margin-top:30px;color:#888;font-size:12px}
"""


@dataclass
class Plot:
    """One embedded figure: what it shows and its PNG (None with the reason when it cannot be drawn)."""

    key: str
    caption: str
    png: bytes | None
    missing: str = ""


def _fmt(value: float) -> str:
    return f"{value:.2e}"


def _worst_row(comparison: Comparison) -> TensorRow | None:
    """The tensor whose differences the histogram shows: the first divergence, else the largest
    non-zero difference of a floating-point tensor."""
    if comparison.first_divergence is not None:
        return comparison.first_divergence
    floats = [r for r in comparison.rows if r.dtype in ("F16", "BF16", "F32", "F64") and r.stats.max_abs > 0]
    # A scalar (the loss) has no distribution to show: prefer the tensors with more than one element.
    return max(floats, key=lambda r: (r.stats.n > 1, r.stats.max_abs), default=None)


def _activation_step(comparison: Comparison) -> int | None:
    """The step whose layer outputs are drawn: the first divergence's, else the largest activation difference's."""
    first = comparison.first_divergence
    if first is not None and (parsed := parse_name(first.name)) is not None:
        return parsed.step
    acts = [(r.stats.max_abs, parse_name(r.name).step) for r in comparison.rows
            if (p := parse_name(r.name)) is not None and p.stage == "activations"]
    return max(acts)[1] if acts else None


def make_plots(comparison: Comparison) -> list[Plot]:
    """Every figure of the report, drawn from the comparison (and, for the histogram and the reference
    loss, read back from the traces one tensor at a time)."""
    ref_losses = reference_losses(comparison.reference) if comparison.reference is not None else None
    plots = [
        Plot("loss", "Loss before each step on both sides" + (" and the float64 reference" if ref_losses else "")
             + ": the curves should lie on each other.",
             figure_png(lambda ax: loss_axis(ax, comparison, ref_losses), (6.4, 3.6))),
        Plot("drift", "The drift view: max |A − B| per pipeline stage per step, against the tolerance. Rounding stays "
             "flat; a porting bug jumps at the stage it enters and grows.",
             figure_png(lambda ax: drift_axis(ax, comparison), (6.4, 3.6))),
        Plot("drift-ulps", "The same drift in units in the last place (float32 rounding is a few ulps).",
             figure_png(lambda ax: drift_axis(ax, comparison, ulps=True), (6.4, 3.6))),
    ]
    if comparison.forward:  # forward passes have no loss
        plots = [p for p in plots if p.key != "loss"]
    if any(r.ref is not None and r.ref.scale > 0 for r in comparison.rows):
        plots.append(Plot("reference", "Each side's distance to the float64 reference per step: the side that moves "
                          "away from it is the one that computes something else.",
                          figure_png(lambda ax: reference_axis(ax, comparison), (6.4, 3.6))))
    worst = _worst_row(comparison)
    if worst is None:
        plots.append(Plot("distribution", "Distribution of differences", None,
                          "every floating-point tensor is bit-identical on both sides: no differences to show"))
    else:
        try:
            histogram = difference_histogram(comparison.a.path, comparison.b.path, worst.name)
        except (BurnsideError, OSError) as exc:
            plots.append(Plot("distribution", "Distribution of differences", None,
                              f"the traces could not be read back ({exc})"))
        else:
            plots.append(Plot("distribution", f"How the differences of {worst.name} spread over orders of magnitude "
                              "(a handful of elements far out is a bug's signature; a bell near the tolerance is "
                              "rounding).", figure_png(lambda ax: histogram_axis(ax, histogram, worst.tol.atol),
                                                       (6.4, 3.6))))
    step = _activation_step(comparison)
    layers = sum(1 for r in comparison.rows if (p := parse_name(r.name)) is not None and p.stage == "activations"
                 and p.step == step)
    # A bar per layer: a deep model's chart grows in height instead of overlapping its labels.
    activations = None if step is None else figure_png(lambda ax: activations_axis(ax, comparison, step),
                                                       (6.4, max(3.6, 1.4 + 0.2 * layers)))
    if activations is None:
        plots.append(Plot("activations", "Layer outputs", None, "no layer outputs were recorded on both sides; name "
                          "a burn layer's output with tap.activation(\"layer\", &x) to see where a step diverges"))
    else:
        plots.append(Plot("activations", f"Every layer's output at {comparison.unit} {step} in execution order: "
                          "the first red bar "
                          "is the first layer that computes something else.", activations))
    return plots


def _verdict(comparison: Comparison) -> str:
    ok = comparison.passed
    rows = comparison.rows
    failed = len(comparison.failed_rows)
    first = comparison.first_divergence
    facts = [f"<div><b>{len(rows)}</b> tensors compared over <b>{comparison.steps}</b> {comparison.unit}"
             f"{'es' if comparison.forward else 's'}; "
             f"<b>{failed}</b> out of tolerance</div>",
             f"<div>worst |A − B| = <span class=mono>{_fmt(comparison.worst)}</span>; tolerance "
             f"<span class=mono>{escape(tolerances_text(comparison))}</span></div>"]
    if comparison.reference is not None:
        facts.append(f"<div>judged against the float64 reference <span class=mono>"
                     f"{escape(comparison.reference.name)}</span></div>")
    if first is not None:
        facts.append(f"<div>first divergence: <a href=\"#first-divergence\" class=mono>{escape(first.name)}</a></div>")
    elif (shape := comparison.first_shape_divergence) is not None:
        facts.append(f"<div>first divergence: <span class=mono>{escape(shape.name)}</span> (shape {escape(shape.a)} "
                     f"in A, {escape(shape.b)} in B)</div>")
    if comparison.statistics:
        facts.append(f"<div><b>{len(comparison.statistics)}</b> tensors recorded as statistics: "
                     f"<b>{len(comparison.unjudged_statistics)}</b> not judged, "
                     f"<b>{len(comparison.failed_statistics)}</b> out of tolerance "
                     "(<a href=\"#statistics\">listed below</a>)</div>")
    for row in rows:
        if row.metrics is not None:
            facts.append(f"<div><span class=mono>{escape(comparison.display_name(row.name))}</span>: "
                         f"{escape(_metrics_text(row))}</div>")
    word = "OK" if ok else "FAIL"
    return (f"<section id=\"verdict\" class=\"{'ok' if ok else 'fail'}\"><div class=\"word\">{word}</div>"
            f"<div class=\"facts\">{''.join(facts)}</div></section>")


def _metrics_text(row: TensorRow) -> str:
    m = row.metrics
    text = f"relative error {m.relative_error:.2e}, cosine {m.cosine:.7f}"
    if m.top1 is not None:
        text += f", top-1 agreement {m.top1:.1%} ({m.top1_agree} of {m.rows})"
    return text


def _findings(comparison: Comparison, diagnoses: list[Diagnosis]) -> str:
    lines = structure_lines(comparison) + finding_lines(comparison)
    parts = ["<h2>Findings</h2>"]
    if lines:
        parts.append("<ul class=\"findings\">" + "".join(
            f"<li class=\"{_STYLE_CLASS.get(style, '')}\">{escape(text)}</li>" for text, style in lines) + "</ul>")
    for d in diagnoses:
        parts.append(f"<div class=\"diagnosis\"><div><span class=\"rule\">{escape(d.rule)}</span> "
                     f"<b>{escape(d.title)}</b>: {escape(d.evidence)}</div>"
                     f"<div class=\"fix\"><b>fix:</b> {escape(d.fix)}</div></div>")
    if not lines and not diagnoses:
        parts.append("<p class=\"note\">Nothing to report: same tensors, bit-identical start, every element within "
                     "tolerance.</p>")
    return "".join(parts)


def _plots(plots: list[Plot]) -> str:
    figures = []
    for plot in plots:
        if plot.png is None:
            figures.append(f"<figure id=\"plot-{plot.key}\" class=\"missing\"><figcaption><b>{escape(plot.caption)}"
                           f"</b>: {escape(plot.missing)}</figcaption></figure>")
            continue
        data = base64.b64encode(plot.png).decode("ascii")
        figures.append(f"<figure id=\"plot-{plot.key}\"><img alt=\"{escape(plot.caption)}\" "
                       f"src=\"data:image/png;base64,{data}\"><figcaption>{escape(plot.caption)}</figcaption></figure>")
    return "<h2>Plots</h2><div class=\"plots\">" + "".join(figures) + "</div>"


def _value(value: object) -> str:
    if value is None:
        return "<span class=note>(absent)</span>"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(text) <= FOLD_CHARS:
        return escape(text)
    return f"<details><summary>{escape(text[:60])}… ({len(text)} chars)</summary>{escape(text)}</details>"


def _metadata(comparison: Comparison) -> str:
    a, b = comparison.a, comparison.b
    rows: list[tuple[str, object, object]] = [("path", str(a.path), str(b.path))]
    keys = list(dict.fromkeys([*a.metadata, *b.metadata]))
    rows += [(key, a.metadata.get(key), b.metadata.get(key)) for key in keys]
    evidence = evidence_of(comparison)
    if not comparison.forward:  # a forward trace has no optimizer and no update to measure one from
        rows.append(("optimizer, measured from the updates", _measured(evidence.optimizer_a),
                     _measured(evidence.optimizer_b)))
        rows.append(("optimizer, first step its declared optimizer does not reproduce",
                     _mismatch(evidence.optimizer_a), _mismatch(evidence.optimizer_b)))
    body = []
    for key, va, vb in rows:
        one_sided = key in _PYTORCH_ONLY_KEYS and (va is None) != (vb is None)
        differs = key not in _SIDE_KEYS and not one_sided and va != vb
        body.append(f"<tr class=\"{'differs' if differs else ''}\"><td class=name>{escape(key)}</td>"
                    f"<td class=val>{_value(va)}</td><td class=val>{_value(vb)}</td></tr>")
    said = ("Metadata as recorded." if comparison.forward else
            "Metadata as recorded, and the optimizer settings measured from each side's own updates.")
    return (f"<h2>Both sides</h2><p class=note>{said} Rows that differ are highlighted.</p>"
            "<table id=\"metadata\"><tr><th class=name>"
            f"</th><th class=name>A: {escape(a.framework)}</th><th class=name>B: {escape(b.framework)}</th></tr>"
            + "".join(body) + "</table>")


def _measured(forensics) -> object:
    """The measured settings to 3 significant digits, so the sides' rounding does not read as a difference;
    a setting within 1e-6 of zero is the fit's noise around an absent one."""
    if forensics is None:
        return None
    return {key: 0 if abs(value) < 1e-6 else float(f"{value:.3g}") for key, value in forensics.measured.items()}


def _mismatch(forensics) -> object:
    if forensics is None:
        return None
    if forensics.mismatch_step is None:
        return "none: every recorded step replays"
    return (f"step {forensics.mismatch_step}, {forensics.mismatch_what} "
            f"(relative residual {forensics.mismatch_residual:.2e})")


def _row(comparison: Comparison, row: TensorRow, first: TensorRow | None) -> str:
    s = row.stats
    classes = "first" if row is first else ("fail" if not row.passed else ("noise" if s.out_of_tol else ""))
    at = "" if row.worst_index is None else "[" + ",".join(map(str, row.worst_index)) + "]"
    ulps = "" if s.max_ulps is None else shown_ulps(row)
    cells = [f"<td class=name>{escape(comparison.display_name(row.name))}</td>",
             f"<td>{escape('×'.join(map(str, row.shape)) or 'scalar')}</td>", f"<td>{s.n}</td>",
             f"<td>{shown_max_abs(row)}</td>", f"<td>{ulps}</td>", f"<td class=mono>{escape(at)}</td>",
             f"<td>{s.out_of_tol}</td>"]
    if comparison.reference is not None:
        if row.ref is None:
            cells += ["<td></td>", "<td></td>", "<td></td>"]
        else:
            judged = "noise" if row.ref.noise else f"{row.ref.verdict.upper()} off ({times(row.ref.ratio)})"
            cells += [f"<td>{_fmt(row.ref.dist_a)}</td>", f"<td>{_fmt(row.ref.dist_b)}</td>",
                      f"<td>{escape(judged)}</td>"]
    if comparison.forward:
        cells.append(f"<td>{escape(_metrics_text(row)) if row.metrics is not None else ''}</td>")
    cells.append(f"<td>{'ok' if row.passed else 'FAIL'}</td>")
    anchor = " id=\"first-divergence\"" if row is first else ""
    return f"<tr class=\"{classes}\"{anchor}>{''.join(cells)}</tr>"


def _tensors(comparison: Comparison) -> str:
    first = comparison.first_divergence
    header = ["<th class=name>tensor</th>", "<th>shape</th>", "<th>n</th>", "<th>max |A−B|</th>", "<th>ulps</th>",
              "<th>at</th>", "<th>out</th>"]
    if comparison.reference is not None:
        header += ["<th>|A−R|</th>", "<th>|B−R|</th>", "<th>judged</th>"]
    if comparison.forward:
        header.append("<th>output metrics</th>")
    header.append("<th></th>")
    head = "<tr>" + "".join(header) + "</tr>"
    groups: dict[str, dict[str, list[TensorRow]]] = {}
    for row in comparison.rows:
        parsed = parse_name(row.name)
        step, stage = (f"{comparison.unit} {parsed.step}", parsed.stage) if parsed else ("other", "other")
        groups.setdefault(step, {}).setdefault(stage, []).append(row)
    everything_open = len(comparison.rows) <= OPEN_ROWS
    order = ("inputs, parameters and buffers as loaded, layer inputs, layer outputs, outputs" if comparison.forward
             else "inputs, parameters, layer outputs, logits, loss, gradients, parameters after the step, buffers, "
                  "optimizer state")
    parts = [f"<h2>Tensors</h2><p class=note>Pipeline order: {order}. Highlighted: out of tolerance"
             f"{'; the first divergence in deep red' if first else ''}"
             f"{'; yellow: beyond the tolerance but rounding noise by the reference' if comparison.reference else ''}."
             "</p><div id=\"tensors\">"]
    for step, stages in groups.items():
        step_rows = [r for rows in stages.values() for r in rows]
        parts.append(_group("step", step, step_rows, everything_open))
        for stage, rows in stages.items():
            parts.append(_group("stage", stage, rows, everything_open))
            parts.append("<table>" + head + "".join(_row(comparison, r, first) for r in rows) + "</table></details>")
        parts.append("</details>")
    parts.append("</div>")
    return "".join(parts)


def _statistics_row(comparison: Comparison, row: StatisticsRow) -> str:
    classes = "fail" if row.verdict == OUT_OF_TOLERANCE else ("noise" if row.verdict == NOT_JUDGED else "")
    bounds = row.ref_bounds()
    cells = [f"<td class=name>{escape(comparison.display_name(row.name))}</td>",
             f"<td>{escape('×'.join(map(str, row.shape)) or 'scalar')}</td>", f"<td>{row.a.n}</td>",
             f"<td>{escape(row.held_a)}</td>", f"<td>{escape(row.held_b)}</td>", f"<td>{_fmt(row.lower_bound)}</td>",
             f"<td>{_fmt(row.a.max_abs)}</td>", f"<td>{_fmt(row.b.max_abs)}</td>"]
    if comparison.reference is not None:
        cells += [f"<td>{_fmt(bounds[0])}</td>", f"<td>{_fmt(bounds[1])}</td>"] if bounds else ["<td></td>"] * 2
    cells.append(f"<td>{escape(row.verdict)}</td>")
    return f"<tr class=\"{classes}\">{''.join(cells)}</tr>"


def _statistics(comparison: Comparison) -> str:
    """The tensors held as statistics only, each with its verdict; nothing when there are none."""
    if not comparison.statistics:
        return ""
    header = ["<th class=name>tensor</th>", "<th>shape</th>", "<th>n</th>", "<th>A holds</th>", "<th>B holds</th>",
              "<th>max |A−B| ≥</th>", "<th>max |A|</th>", "<th>max |B|</th>"]
    if comparison.reference is not None:
        header += ["<th>max |A−R| ≥</th>", "<th>max |B−R| ≥</th>"]
    header.append("<th>verdict</th>")
    return ("<h2 id=\"statistics\">Tensors recorded as statistics</h2><p class=note>A trace held these as "
            "statistics only (mean, norm, largest magnitude, hash): bit-identical when the hashes agree; out of "
            "tolerance when the lower bound on max |A−B| they give is beyond the tolerance; otherwise not judged "
            "(statistics cannot tell rounding from a bug: record those steps in full to judge them). Highlighted: "
            "out of tolerance; yellow: not judged.</p><table>" + "<tr>" + "".join(header) + "</tr>"
            + "".join(_statistics_row(comparison, r) for r in comparison.statistics) + "</table>")


def _not_compared(comparison: Comparison) -> str:
    """Every tensor the findings count rather than list: the shape and dtype mismatches with both sides' shapes,
    and the names on one side only, one folded list per stage; nothing when every tensor was compared."""
    parts: list[str] = []

    def fold(label: str, header: str, rows: list[str]) -> None:
        parts.append(f"<details class=\"stage\"><summary><b>{escape(label)}</b>: {len(rows)} tensors</summary>"
                     f"<table><tr>{header}</tr>{''.join(rows)}</table></details>")

    problems: dict[tuple[str, str], list] = {}
    for problem in comparison.structure:
        problems.setdefault((problem.what, stage_of(problem.name)), []).append(problem)
    for (what, stage), group in problems.items():
        fold(f"{what} mismatch, {stage}", "<th class=name>tensor</th><th class=name>A</th><th class=name>B</th>",
             [f"<tr><td class=name>{escape(comparison.display_name(p.name))}</td><td class=val>{escape(p.a)}</td>"
              f"<td class=val>{escape(p.b)}</td></tr>" for p in group])
    for label, names in (("only in A", comparison.only_in_a), ("only in B", comparison.only_in_b),
                         ("not recorded in B (optional)", comparison.unrecorded_in_b),
                         ("not recorded in A (optional)", comparison.unrecorded_in_a),
                         ("constant buffers only in A", comparison.constants_only_in_a),
                         ("constant buffers only in B", comparison.constants_only_in_b)):
        for stage, group in by_stage(names).items():
            fold(f"{label}, {stage}", "<th class=name>tensor</th>",
                 [f"<tr><td class=name>{escape(comparison.display_name(n))}</td></tr>" for n in group])
    if not parts:
        return ""
    return ("<h2 id=\"not-compared\">Not compared</h2><p class=note>Every tensor of another shape or dtype on the "
            "two sides, and every tensor one side holds and the other does not (the findings count them).</p>"
            + "".join(parts))


def _group(kind: str, label: str, rows: list[TensorRow], everything_open: bool) -> str:
    failed = sum(1 for r in rows if not r.passed)
    state = f"<span class=bad>{failed} out of tolerance</span>" if failed else "<span class=good>all within</span>"
    opened = " open" if everything_open or failed else ""
    return (f"<details class=\"{kind}\"{opened}><summary><b>{escape(label)}</b>: {len(rows)} tensors, {state}"
            "</summary>")


def html_report(comparison: Comparison, diagnoses: list[Diagnosis]) -> str:
    """The whole report as one HTML document."""
    a, b = comparison.a, comparison.b
    title = f"burnside: {a.framework} {a.path.name} vs {b.framework} {b.path.name}"
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "".join([
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        "<h1>burnside parity report</h1>",
        f"<p class=\"sides\">A: <span class=mono>{escape(str(a.path))}</span> ({escape(a.framework)} "
        f"{escape(a.framework_version)})<br>B: <span class=mono>{escape(str(b.path))}</span> "
        f"({escape(b.framework)} {escape(b.framework_version)})</p>",
        _verdict(comparison),
        _findings(comparison, diagnoses),
        _plots(make_plots(comparison)),
        _metadata(comparison),
        _tensors(comparison),
        _statistics(comparison),
        _not_compared(comparison),
        f"<footer>burnside {escape(__version__)}, {generated}</footer></body></html>",
    ])


def write_html_report(comparison: Comparison, diagnoses: list[Diagnosis], path: Path) -> Path:
    """Write the report to ``path`` atomically (a reader never sees half a page)."""
    page = html_report(comparison, diagnoses)
    return write_atomic(path, page)

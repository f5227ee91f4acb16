"""Render a `Comparison` as the seed's table: a row per tensor, the verdict line, the diagnoses."""

from __future__ import annotations

import math

from rich.console import Console
from rich.text import Text

from burnside.compare import Comparison, StatisticsRow, StructureProblem, TensorRow
from burnside.compare.statistics_rows import NOT_JUDGED, OUT_OF_TOLERANCE
from burnside.optimizers.settings import optimizer_notes
from burnside.compare.pairing import pair_renamed
from burnside.compare.rounding import FLOOR_HALF_ULPS, NOISE_FACTOR, SUM_FACTOR, sum_half_ulps
from burnside.compare.statistics_parting import first_statistics_parting, statistics_parting_first
from burnside.diagnose import Diagnosis
from burnside.diagnose.diagnosis import listed
from burnside.diagnose.recording import (
    buffer_findings,
    by_buffer,
    renamed_findings,
    renamed_tap_findings,
    untapped_finding,
)
from burnside.trace import parse_name



def times(ratio: float) -> str:
    """A distance ratio as the table prints it: `230x`, or `infinitely` when the other side is exactly on its
    reference."""
    if math.isnan(ratio):
        return "NaN"
    if ratio == float("inf"):
        return "infinitely"
    return f"{ratio:,.0f}x" if ratio >= 1000 else f"{ratio:.3g}x"

def shown_ulps(row: TensorRow) -> str:
    """The largest ULP distance; `NaN` (`inf`) where an element is NaN (infinite) on one side only: no number
    of representable values lies between a NaN and a number, and the finite elements' count would read as
    the row's."""
    if row.stats.max_ulps is None:
        return "-"
    if row.stats.nan_one_side:
        return "NaN"
    if row.stats.nonfinite_a_only or row.stats.nonfinite_b_only:
        return "inf"
    return str(row.stats.max_ulps)


def shown_max_abs(row: TensorRow, digits: int = 2) -> str:
    """max|diff|, `NaN` where an element is NaN on one side only (every report prints it so)."""
    return "NaN" if row.stats.nan_one_side else f"{row.stats.max_abs:.{digits}e}"


def _distance(d: float) -> str:
    return "NaN" if math.isnan(d) else f"{d:.2e}"


def row_line(comparison: Comparison, row: TensorRow, width: int) -> Text:
    """One row: name, n, max|diff|, max ulps, worst index, out-of-tolerance count."""
    s = row.stats
    at = "-" if row.worst_index is None else "[" + ",".join(map(str, row.worst_index)) + "]"
    text = Text(f"{comparison.display_name(row.name):<{width}} n={s.n:>3}  max|diff|={shown_max_abs(row)}"
                f"  ulps={shown_ulps(row):>3}  at={at:<7} out={s.out_of_tol}")
    if row.metrics is not None:
        text.append(f"  {row.metrics.describe()}")
    if row.ref is not None:
        text.append(f"  |A-R|={_distance(row.ref.dist_a)} |B-R|={_distance(row.ref.dist_b)}")
        if row.ref.noise:
            text.append("  noise" if s.out_of_tol else "", style="green")
        else:
            text.append(f"  {row.ref.verdict.upper()} off ({times(row.ref.ratio)})", style="bold red")
    if s.nonfinite_a_only or s.nonfinite_b_only:
        text.append(f"  non-finite only in A: {s.nonfinite_a_only}, only in B: {s.nonfinite_b_only}", style="red")
    if not row.passed:
        text.append("  FAIL", style="bold red")
    return text


def statistics_row_line(comparison: Comparison, row: StatisticsRow, width: int) -> Text:
    """One tensor held as statistics on some side: name, n, `stats`, how each side holds it, the lower bound on
    max|diff| and its verdict."""
    text = Text(f"{comparison.display_name(row.name):<{width}} n={row.a.n:>3}  stats (A {row.held_a}, B {row.held_b})"
                f"  max|diff|>={_distance(row.lower_bound)}")
    bounds = row.ref_bounds()
    if bounds is not None:
        text.append(f"  |A-R|>={_distance(bounds[0])} |B-R|>={_distance(bounds[1])}")
    if row.verdict == OUT_OF_TOLERANCE:
        text.append(f"  out of tolerance (beyond {row.allowed:.2e})  FAIL", style="bold red")
    elif row.verdict == NOT_JUDGED:
        text.append("  not judged", style="yellow")
    else:
        text.append("  bit-identical", style="green")
    return text


def steps_text(steps: list[int]) -> str:
    """`1-8`, `1-3, 5, 7-8`: ascending step numbers as ranges."""
    parts: list[str] = []
    for k in sorted(set(steps)):
        if parts and parts[-1][1] == k - 1:
            parts[-1] = (parts[-1][0], k)
        else:
            parts.append((k, k))
    return ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in parts)


def statistics_lines(comparison: Comparison) -> list[Line]:
    """What the tensors held as statistics showed and what could not be judged, one line, then where the
    statistics show the sides part first. Nothing for traces without statistics."""
    rows = comparison.statistics
    if not rows:
        return []
    plural = "batches" if comparison.forward else "steps"
    steps = [row.step for row in rows if row.step is not None]
    identical = sum(1 for row in rows if row.bit_identical)
    unjudged, failed = comparison.unjudged_statistics, comparison.failed_statistics
    text = f"{len(rows)} tensors recorded as statistics ({plural} {steps_text(steps)}): {identical} bit-identical"
    if failed:
        text += f", {len(failed)} out of tolerance (statistics prove them beyond it)"
    if unjudged:
        # the largest lower bound: the most the statistics prove the unjudged tensors apart
        largest = max(row.lower_bound for row in unjudged)
        full = sorted({row.step for row in unjudged if row.step is not None})
        # layer outputs and inputs held as statistics at every step (layer_statistics) stay so in a full step
        layers = any(side.metadata.get("layer_statistics") is True for side in (comparison.a, comparison.b)) and any(
            (p := parse_name(row.name)) is not None and p.stage in ("activations", "layer_inputs") for row in unjudged)
        text += (f", {len(unjudged)} not judged (they differ by at least {_distance(largest)}; statistics cannot "
                 f"tell rounding from a bug: record those {plural} in full, full_steps={full}"
                 f"{', layer_statistics=False' if layers else ''})")
    lines: list[Line] = [(text, "red" if failed else ("yellow" if unjudged else "green"))]
    first = first_statistics_parting(comparison)
    if first is not None:
        where = f"{comparison.unit} {first.step}" if first.step is not None else "a tensor"
        line = (f"statistics part first at {where}: {comparison.display_name(first.name)} (differs by at least "
                f"{_distance(first.lower_bound)})")
        if first.verdict == OUT_OF_TOLERANCE:
            line += f": out of tolerance, beyond the {first.allowed:.2e} it allows"
        lines.append((line, "red" if first.verdict == OUT_OF_TOLERANCE else "yellow"))
    return lines


def tolerances_text(comparison: Comparison) -> str:
    """`tol=1e-06`, then every override that applied: `tol=1e-06, *.inputs.*: tol=5`."""
    return ", ".join(tol.describe() if glob is None else f"{glob}: {tol.describe()}"
                     for glob, tol in comparison.tolerances_used())


def verdict_line(comparison: Comparison) -> Text:
    """`worst=1.19e-07 tol=1e-06 OK`, with the tolerances actually used (default and overrides)."""
    ok = comparison.passed
    text = Text(f"worst={comparison.worst:.2e} {tolerances_text(comparison)} ")
    if comparison.reference is not None:
        text.append(f"reference={comparison.reference} (noise: within {NOISE_FACTOR:g}x the other side's "
                    f"distance + {FLOOR_HALF_ULPS:g} half-ulps, {SUM_FACTOR:g} sqrt(n) for a sum of n terms) ")
    text.append("OK" if ok else "FAIL", style="bold green" if ok else "bold red")
    return text


def _summed(terms: int) -> str:
    """`, a float32 sum of 2048 terms` where a tensor's floor is a sum's, else nothing."""
    return f", a float32 sum of {terms} terms" if sum_half_ulps(terms) > FLOOR_HALF_ULPS else ""


def _batch_of(comparison: Comparison, name: str) -> str:
    """` in batch 2` for a forward trace's tensor (`step{k}` is batch k there), else nothing."""
    parsed = parse_name(name)
    return f" in batch {parsed.step}" if comparison.forward and parsed is not None else ""


def divergence_text(comparison: Comparison, first: TensorRow) -> str:
    """`first divergence: step0.activations.ln2 (LayerNorm, the layer before it, step0.activations.ln1, agrees) …`."""
    kind, before = comparison.layer_of(first)
    where = first.name
    if kind is not None or before is not None:
        parts = [kind] if kind else []
        if before is not None and before.passed:
            parts.append(f"the layer before it, {before.name}, agrees")
        where += f" ({', '.join(parts)})" if parts else ""
    where += _batch_of(comparison, first.name)
    text = (f"first divergence: {where} (max|diff|={shown_max_abs(first)}, "
            f"{first.stats.out_of_tol} of {first.stats.n} out of tolerance); later rows usually follow from it")
    parsed = parse_name(first.name)
    earlier = statistics_parting_first(comparison)
    if earlier is not None:  # the sides part before it, in a tensor recorded as statistics
        text += (f"; tensors recorded as statistics part before it, from {earlier.name} at {comparison.unit} "
                 f"{earlier.step}, so it may follow from there")
        return text
    if comparison.within_rounding_reach(first):
        text += (f"; without a float64 reference this cannot be told from rounding: the layer outputs before it at "
                 f"{comparison.unit} {parsed.step} already differ by up to {comparison.rounding_upstream(first):.2e}, "
                 f"and {NOISE_FACTOR:g}x that is rounding's reach: judge it with --reference (`record(..., "
                 "reference=PATH)` or `record_forward(..., reference=PATH)` records one)")
        return text
    drift = comparison.drift_before(parsed.step) if parsed is not None and parsed.stage != "params_before" else 0.0
    # a forward trace's parameters are the loaded ones for every batch: no rounding grows between batches
    if drift > 0 and comparison.reference is None and not comparison.start_mismatch and not comparison.forward:
        text += (f"; step {parsed.step} starts from parameters already apart by up to {drift:.2e}, so this may be "
                 "rounding grown over the steps: judge it with a float64 reference (--reference; `burnside run` and "
                 "`check --reference` record or take one)")
    return text


def shape_divergence_text(comparison: Comparison, first: StructureProblem) -> str:
    """`first divergence: step0.activations.conv (Conv2d): its shape is [1, 8, 16, 16] in A, [1, 8, 32, 32] in B …`."""
    parsed = parse_name(first.name)
    kind = None
    if parsed is not None and parsed.stage == "activations":
        modules = comparison.a.metadata.get("modules")
        kind = modules.get(parsed.rest.split("#", 1)[0]) if isinstance(modules, dict) else None
    where = first.name + (f" ({kind})" if isinstance(kind, str) else "") + _batch_of(comparison, first.name)
    text = f"first divergence: {where}: its shape is {first.a} in A, {first.b} in B"
    if parsed is not None and parsed.stage in ("activations", "outputs", "logits"):
        module = parsed.rest.split("#", 1)[0] if parsed.stage == "activations" and parsed.rest else ""
        configured = shape_settings(comparison.a.metadata, module)
        settings = ("output_padding, stride, padding, dilation, kernel size" if "ConvTranspose" in str(kind or "")
                    else "stride, padding, dilation, kernel size, pooling, a reshape")
        text += (f" while every tensor before it agrees: the layer is configured otherwise on one side ({settings})"
                 + (f"; A's {module} is built with {configured}" if configured else "")
                 + "; later rows follow from it")
    return text


#: The settings of a module that decide the shape of its output, as `module_settings` records them.
_SHAPE_SETTINGS = ("kernel_size", "stride", "padding", "output_padding", "dilation", "ceil_mode")


def shape_settings(metadata: dict, module: str) -> str:
    """A trace's configured settings of ``module`` that decide its output's shape (`stride (2, 2), padding (1, 1)`),
    from its `module_settings`; "" when it records none."""
    recorded = metadata.get("module_settings")
    settings = recorded.get(module) if isinstance(recorded, dict) and module else None
    if not isinstance(settings, dict):
        return ""
    def shown(value: object) -> str:
        return f"({', '.join(map(str, value))})" if isinstance(value, list) else str(value)
    return ", ".join(f"{key} {shown(settings[key])}" for key in _SHAPE_SETTINGS if key in settings)


def output_metric_lines(comparison: Comparison) -> list[Line]:
    """A forward trace's outputs as an inference port is judged: relative error, cosine, top-1 agreement."""
    lines: list[Line] = []
    for row in comparison.rows:
        m = row.metrics
        if m is None:
            continue
        text = (f"{comparison.display_name(row.name)}: relative error {m.relative_error:.2e}, cosine similarity "
                f"{m.cosine:.7f}")
        if m.top1 is not None:
            text += f", top-1 agreement {m.top1:.1%} ({m.top1_agree} of {m.rows} rows)"
        lines.append((text, "cyan" if row.passed else "yellow"))
    return lines


def generation_line(comparison: Comparison) -> Line | None:
    """A generation trace's (`record_generate`) steps as a decode loop is judged: the logits' relative error at each
    step, and the first step whose chosen token (the argmax of its last logits row) would differ on B, fed A's
    tokens (teacher-forced) all along; None for another trace."""
    generation = comparison.a.metadata.get("generation")
    if not comparison.forward or not isinstance(generation, dict):
        return None
    by_step = {}
    for row in comparison.rows:
        parsed = parse_name(row.name)
        if row.metrics is not None and row.metrics.last is not None and parsed is not None \
                and parsed.stage == "outputs" and parsed.step not in by_step:
            by_step[parsed.step] = row.metrics
    if not by_step:
        return None
    errors = ", ".join(f"{m.relative_error:.1e}" for _, m in sorted(by_step.items()))
    text = (f"generation, teacher-forced over {len(by_step)} steps (the prompt, then one token each): the logits' "
            f"relative error per step {errors}; ")
    parted = next(((k, m) for k, m in sorted(by_step.items()) if m.last[0] != m.last[1]), None)
    if parted is None:
        return text + "B chooses A's token at every step", "cyan"
    k, m = parted
    return (text + f"B would choose another token from step {k} on (A's {m.last[0]}, B's {m.last[1]})"
            + (", at the prompt" if k == 0 else f", {k} token{'s' if k > 1 else ''} into the generation"), "yellow")


def by_batch_line(comparison: Comparison) -> Line | None:
    """`first diverging layer per batch: batch 0 conv, batch 1 conv` for a forward trace of several batches."""
    found = comparison.first_divergence_by_step()
    if not comparison.forward or comparison.steps < 2 or not found:
        return None
    parts = [f"{comparison.unit} {k} {parse_name(name).rest or parse_name(name).stage}" for k, name in found.items()]
    return ("first diverging layer per batch: " + ", ".join(parts), "yellow")


def framework_lines(comparison: Comparison) -> list[str]:
    """One line per framework difference found: what, where it was detected, and its size."""
    lines = []
    for d in comparison.framework_differences:
        effect = ", ".join(f"{stage} {size:.2e}" for stage, size in d.effect.items() if size > 0)
        lines.append(
            f"framework difference ({comparison.side_name(d.side)}, not the port): {d.title}. Detected at "
            f"{d.detected_at}: relative offset {d.relative_offset:.3g}; that side is {d.dist_variant:.2e} from a "
            f"float64 run with its framework's constants and {d.dist_plain:.2e} from PyTorch's, so it is judged by the "
            f"former. Its size in exact arithmetic, max per stage over the run: {effect}")
    return lines


def zero_gradient_lines(comparison: Comparison) -> list[str]:
    """The parameters with elements whose gradient is zero up to rounding: one line, however many there are."""
    found = comparison.zero_gradients
    if not found:
        return []
    adam = any(side.optimizer.get("name") in ("adam", "adamw") for side in (comparison.a, comparison.b))
    each = [f"{z.param}, {z.count} of {z.n} elements from step {z.first_step}" for z in found]
    line = (f"zero gradient up to rounding: {each[0]}" if len(found) == 1 else
            f"zero gradient up to rounding in {len(found)} parameters: {listed(each, 4)}")
    line += (" (the float64 reference's gradient there is below float32 rounding of the tensor; each side's is its "
             "own rounding noise, with its own sign)")
    if adam:
        line += ("; Adam divides that noise by its own root mean square and moves those elements by up to lr "
                 "per step, in directions that differ between the sides, so they are left out of the verdict "
                 "from then on: they are not the port's error")
    return [line]


#: A line of the report beside the table: its text and its rich style (the HTML report maps the style to a class).
Line = tuple[str, str]


#: Names a line that stands for many tensors shows before it counts the rest.
_SHOWN = 3


def stage_of(name: str) -> str:
    """A tensor's stage (`activations`, `grads`, ...), `other` for a name of no stage."""
    parsed = parse_name(name)
    return parsed.stage if parsed is not None else "other"


def by_stage(names: list[str]) -> dict[str, list[str]]:
    """``names`` grouped by their stage, each group and the stages in first-seen order: a line per stage, however
    many steps and tensors."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(stage_of(name), []).append(name)
    return groups


def _listed_in(key: str) -> str:
    """Where the whole list of a line that shows a few names is."""
    return f" (`--json` lists them all under {key}, the HTML report (--report) too)"


def _many(comparison: Comparison, names: list[str], stage: str, key: str, shown: list[str] | None = None,
          what: str = "") -> str:
    """`18 activations tensors: a, b, c and 15 more (...)`: a count (and ``what`` they are), the first few
    (``shown``: each name as the line shows it, else its display name) and, when some are not shown, where they
    all are."""
    shown = shown if shown is not None else [comparison.display_name(name) for name in names]
    text = f"{len(names)} {stage} tensor{'s' if len(names) != 1 else ''}{what}: {listed(shown, _SHOWN)}"
    return text + (_listed_in(key) if len(names) > _SHOWN else "")


def structure_lines(comparison: Comparison) -> list[Line]:
    """What stops the rows from measuring the port: a start that is not bit-identical, tensors named
    differently or only on one side, shapes and dtypes that differ."""
    lines: list[Line] = []
    loaded = comparison.loading_names  # named with their fault by D014 instead
    before = "at the start" if comparison.forward else "before the step"
    for row in comparison.start_mismatch:
        if row.name in loaded:
            continue
        lines.append((f"not bit-identical {before}: {comparison.display_name(row.name)}: {row.stats.differing} "
                      f"of {row.stats.n} elements differ, up to {shown_ulps(row)} ulps "
                      f"(max|diff|={shown_max_abs(row)}); "
                      "every output below measures this input difference too", "bold yellow"))
    pairs, only_a, only_b = pair_renamed(comparison.only_in_a, comparison.only_in_b)
    lines += [(line, "red") for line in buffer_findings(comparison, only_a, only_b)]
    missing = set(comparison.missing_buffers("a")) | set(comparison.missing_buffers("b"))
    only_a = [n for n in only_a if n not in missing]
    only_b = [n for n in only_b if n not in missing]
    lines += [(line, "red") for line in renamed_findings(pairs)]
    # one line per stage, a few names and a count: hundreds of names (a module missing on every step, every layer
    # after a padding slip in every batch) would bury the verdict
    for side, names in (("A", only_a), ("B", only_b)):
        for stage, group in by_stage(names).items():
            shown = (comparison.display_name(group[0]) if len(group) == 1 else
                     _many(comparison, group, stage, f"only_in_{side.lower()}"))
            lines.append((f"only in {side}: {shown}", "red"))
    problems: dict[tuple[str, str], list[StructureProblem]] = {}
    for problem in comparison.structure:
        problems.setdefault((problem.what, stage_of(problem.name)), []).append(problem)
    for (what, stage), group in problems.items():
        first = group[0]
        if len(group) == 1:
            line = f"{what} mismatch: {comparison.display_name(first.name)}: A {first.a}, B {first.b}"
        else:
            shown = [f"{comparison.display_name(p.name)} (A {p.a}, B {p.b})" for p in group]
            line = f"{what} mismatch in {_many(comparison, [p.name for p in group], stage, 'structure', shown)}"
        hints = list(dict.fromkeys(p.hint for p in group if p.hint))
        lines.append((line + "".join(f" ({hint})" for hint in hints), "red"))
    return lines


def constant_lines(comparison: Comparison) -> list[Line]:
    """The non-persistent buffers (constants) one side records and the other computes inline: one line a side."""
    lines: list[Line] = []
    for side, other, names in (("A", "B", comparison.constants_only_in_a), ("B", "A", comparison.constants_only_in_b)):
        found = by_buffer(names)
        persistent = [b for b in found if b in comparison.persistent_constants]
        registered = [b for b in found if b not in comparison.persistent_constants]
        if registered:
            lines.append((f"constant buffers only in {side} (registered with persistent=False, outside the state_dict; "
                          f"{other} computes them inline), not compared: {listed(registered, 4)}", "dim"))
        if persistent:
            lines.append((f"constant buffers only in {side} (persistent, in the state_dict, and the same at every "
                          f"{comparison.unit} recorded; {other} computes them inline), not compared: "
                          f"{listed(persistent, 4)}; a layer that reads a value of its own parts where it reads it",
                          "dim"))
    if comparison.tied_copies:
        lines.append((f"tied in A, a copy in B (its own parameter, bit for bit the one A ties it to): "
                      f"{listed(comparison.tied_copies, 4)}", "dim"))
    return lines


def reference_pin_lines(comparison: Comparison) -> list[Line]:
    """What the float64 reference computed with float32's constants (as the float32 loop did), and what it could
    not pin, so a verdict judged by it says so."""
    lines: list[Line] = []
    if comparison.reference_pinned:
        lines.append((f"float64 reference: float32's constants kept, as the loop computes them: "
                      f"{comparison.reference_pinned}", "dim"))
    if comparison.reference_unpinned:
        lines.append((f"float64 reference: could not keep float32's value of {comparison.reference_unpinned}; a "
                      "difference at those calls may be the reference's own", "yellow"))
    return lines


def finding_lines(comparison: Comparison) -> list[Line]:
    """What the verdict rests on: framework differences, zero gradients, the first divergence (or that
    the differences are noise), and the optional tensors one side did not record."""
    lines: list[Line] = [(comparison.accumulation + " (D018 below)", "yellow")] if comparison.accumulation else []
    if comparison.renamed:
        shown = ", ".join(f"{b} as {a}" for a, b in list(comparison.renamed.items())[:3])
        more = f" and {len(comparison.renamed) - 3} more" if len(comparison.renamed) > 3 else ""
        lines.append((f"named from what B loaded: {len(comparison.renamed)} of B's tensors hold A's under other names "
                      f"({shown}{more}); compared under A's names", "cyan"))
    if comparison.crashed:
        lines.insert(0, (f"B crashed in {comparison.crashed}; what ran before the crash is compared below", "red"))
    lines += statistics_lines(comparison)
    lines += [(line, "cyan") for line in framework_lines(comparison) + zero_gradient_lines(comparison)]
    lines += reference_pin_lines(comparison)
    first = comparison.first_divergence
    shape = comparison.first_shape_divergence
    if shape is not None:
        lines.append((shape_divergence_text(comparison, shape), "yellow"))
    elif first is not None and first.ref is not None and math.isnan(first.ref.dist_a if first.ref.verdict == "a"
                                                                     else first.ref.dist_b):
        kind = comparison.layer_of(first)[0]
        lines.append((
            f"real difference: {comparison.side_name(first.ref.verdict)} holds NaN where the float64 reference is "
            f"finite, from {first.name}{f' ({kind})' if kind else ''} on; later rows follow from it", "yellow"))
    elif first is not None and first.ref is not None and first.ref.overruled:
        kind = comparison.layer_of(first)[0]
        lines.append((
            f"real difference: {comparison.side_name(first.ref.verdict)} is {times(first.ref.ratio)} further from the "
            f"float64 reference than the other side at {first.name}{f' ({kind})' if kind else ''} (|A-R|="
            f"{first.ref.dist_a:.2e}, |B-R|={first.ref.dist_b:.2e}), within the noise band "
            f"({NOISE_FACTOR:g}x the other side's + {FLOOR_HALF_ULPS:g} half-ulps), but {first.ref.overruled}: "
            "not rounding; later rows follow from it", "yellow"))
    elif first is not None and first.ref is not None:
        kind = comparison.layer_of(first)[0]
        lines.append((
            f"real difference: {comparison.side_name(first.ref.verdict)} is {times(first.ref.ratio)} further from the "
            f"float64 reference than the other side, from {first.name}{f' ({kind})' if kind else ''} on "
            f"(|A-R|={first.ref.dist_a:.2e}, |B-R|={first.ref.dist_b:.2e}, beyond the noise band "
            f"{NOISE_FACTOR:g}x the other side's + {sum_half_ulps(first.ref.terms):.3g} "
            f"half-ulps{_summed(first.ref.terms)} = {first.ref.band:.2e}); later rows follow from it", "yellow"))
    elif first is not None:
        lines.append((divergence_text(comparison, first), "yellow"))
    elif comparison.reference is not None:
        beyond = sum(1 for r in comparison.rows if r.stats.out_of_tol)
        if beyond:
            lines.append((f"{beyond} tensor(s) beyond the tolerance are rounding noise: each side is within the "
                          f"tolerance of the float64 reference or within the noise band ({NOISE_FACTOR:g}x the other "
                          f"side's distance from it + {FLOOR_HALF_ULPS:g} half-ulps, {SUM_FACTOR:g} sqrt(n) for a "
                          "float32 sum of n terms)", "green"))
    summed = [r for r in comparison.rows if r.within_sum_rounding]
    if summed and first is None:
        worst = max(summed, key=lambda r: r.stats.max_abs)
        lines.append((f"{len(summed)} tensor(s) beyond the tolerance are float32 sums of many terms "
                      "within the rounding "
                      f"such a sum carries on two sides ({SUM_FACTOR:g} sqrt(n) half-ulps of its scale each; "
                      f"{worst.name}: a sum of {worst.terms} terms, {worst.stats.max_abs:.2e} "
                      f"apart, up to {worst.sum_band:.2e}): passed without a float64 reference, which would judge "
                      "them (--reference)", "yellow"))
    if comparison.optimizer_differences and not comparison.failed_rows:
        lines.append((f"the optimizers are declared otherwise ({', '.join(comparison.optimizer_differences)}; "
                      "D005 below): "
                      f"a port configured so trains another optimizer, even where the {comparison.steps} recorded "
                      f"{comparison.unit}(s) do not show it yet", "yellow"))
    if not comparison.forward:
        lines += [(note, "cyan") for note in optimizer_notes(comparison.a.optimizer, comparison.b.optimizer)]
    per_batch = by_batch_line(comparison)
    if per_batch is not None:
        lines.append(per_batch)
    lines += output_metric_lines(comparison)
    generation = generation_line(comparison)
    if generation is not None:
        lines.append(generation)
    lines += [(line, "yellow") for line in renamed_tap_findings(comparison)]
    lines += constant_lines(comparison)
    untapped = untapped_finding(comparison)
    if untapped is not None:
        lines.append((untapped, "yellow"))
    for side, names in (("B", comparison.unrecorded_in_b), ("A", comparison.unrecorded_in_a)):
        for stage, group in by_stage(names).items():
            # what PyTorch fed each layer: the burn recorder writes none, by design
            what = " (what PyTorch fed each layer; a port records none)" if stage == "layer_inputs" else ""
            lines.append((f"not recorded in {side} (optional, not compared): "
                          f"{_many(comparison, group, stage, f'unrecorded_in_{side.lower()}', what=what)}", "dim"))
    return lines


def render(comparison: Comparison, diagnoses: list[Diagnosis], console: Console, *,
           failing_rows: int | None = None) -> None:
    """Print the whole comparison: start check, structure, rows, verdict, earliest divergence, diagnoses.

    With ``failing_rows``, only that many of the rows that fail are printed, and the rest counted
    (a failure message, where the rows that pass are noise)."""
    a, b = comparison.a, comparison.b
    console.print(Text(f"A: {a.path}  ({a.framework} {a.framework_version})", style="dim"))
    console.print(Text(f"B: {b.path}  ({b.framework} {b.framework_version})", style="dim"))
    for text, style in structure_lines(comparison):
        console.print(Text(text, style=style))
    rows = comparison.rows if failing_rows is None else comparison.failed_rows[:failing_rows]
    held = comparison.statistics if failing_rows is None else comparison.failed_statistics[:failing_rows]
    width = max((len(comparison.display_name(r.name)) for r in [*rows, *held]), default=10) + 1
    if held:  # full rows and statistics rows together, in pipeline order
        merged = sorted([*rows, *held], key=lambda r: comparison.order.get(r.name, 0))
        for row in merged:
            console.print(statistics_row_line(comparison, row, width) if isinstance(row, StatisticsRow)
                          else row_line(comparison, row, width))
    else:
        for row in rows:
            console.print(row_line(comparison, row, width))
    if failing_rows is not None and len(comparison.failed_rows) > len(rows):
        console.print(f"... and {len(comparison.failed_rows) - len(rows)} more rows out of tolerance "
                      "(`burnside compare` prints them all)")
    if failing_rows is not None and len(comparison.failed_statistics) > len(held):
        console.print(f"... and {len(comparison.failed_statistics) - len(held)} more statistics rows out of "
                      "tolerance (`burnside compare` prints them all)")
    console.print(verdict_line(comparison))
    for text, style in finding_lines(comparison):
        console.print(Text(text, style=style))
    for d in diagnoses:
        console.print(Text(f"{d.rule} {d.title}: ", style="bold magenta") + Text(d.evidence))
        console.print(Text(f"  fix: {d.fix}", style="magenta"))

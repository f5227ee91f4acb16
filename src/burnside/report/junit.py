"""The comparison as JUnit XML (`--junit FILE`), the report format CI systems read.

One test suite per comparison, one test case per compared tensor (a failure when it is out of
tolerance), plus one per structural problem and per tensor of a start that is not bit-identical,
so a pipeline shows which tensors diverged. A tensor a trace holds as statistics only is a test case too: a failure
when its statistics prove it out of tolerance, skipped when they cannot judge it. The diagnoses go to the suite's
system-out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from burnside.compare import Comparison
from burnside.diagnose import Diagnosis
from burnside.compare.statistics_rows import NOT_JUDGED, OUT_OF_TOLERANCE
from burnside.report.table import shown_max_abs, shown_ulps, statistics_lines


def comparison_junit(comparison: Comparison, diagnoses: list[Diagnosis]) -> str:
    """The JUnit XML document for one comparison."""
    suite = ET.Element("testsuite", name=f"burnside compare {comparison.a.path.name} {comparison.b.path.name}")
    failures = 0
    start = {r.name for r in comparison.start_mismatch}
    loading = {f.name: f for f in comparison.loading}  # a forward trace's start tensors, each with its fault
    before = "at the start" if comparison.forward else "before the step"
    for row in comparison.rows:
        case = ET.SubElement(suite, "testcase", classname=_stage(row.name), name=row.name)
        s = row.stats
        if row.name in loading:
            failures += 1
            fault = loading.pop(row.name)
            ET.SubElement(case, "failure", message=f"not loaded as in the checkpoint: {fault.kind}",
                          type="loading").text = f"{fault.evidence}; fix: {fault.fix}"
        elif row.name in start:
            failures += 1
            ET.SubElement(case, "failure", message=f"not bit-identical {before}", type="start").text = (
                f"{s.differing} of {s.n} elements differ, up to {shown_ulps(row)} ulps "
                f"(max|diff|={shown_max_abs(row, 3)})")
        elif not row.passed:
            failures += 1
            ET.SubElement(case, "failure", message=f"{s.out_of_tol} of {s.n} out of tolerance",
                          type="tolerance").text = (
                f"max|diff|={shown_max_abs(row, 3)} ulps={shown_ulps(row)} at {list(row.worst_index or ())} "
                f"({row.tol.describe()})")
    for held in comparison.statistics:
        case = ET.SubElement(suite, "testcase", classname=_stage(held.name), name=held.name)
        if held.verdict == OUT_OF_TOLERANCE:
            failures += 1
            ET.SubElement(case, "failure", message="statistics prove it out of tolerance", type="tolerance").text = (
                f"max|diff| >= {held.lower_bound:.3e}, beyond the {held.allowed:.3e} {held.tol.describe()} allows "
                f"(A {held.held_a}, B {held.held_b})")
        elif held.verdict == NOT_JUDGED:
            ET.SubElement(case, "skipped", message=(
                f"recorded as statistics, not judged: max|diff| >= {held.lower_bound:.3e}; statistics cannot tell "
                "rounding from a bug"))
    problems = [(n, "only in A") for n in comparison.only_in_a] + [(n, "only in B") for n in comparison.only_in_b]
    problems += [(p.name, f"{p.what} mismatch: A {p.a}, B {p.b}") for p in comparison.structure]
    for fault in loading.values():  # the faults of tensors not compared (another shape or dtype, one side only)
        failures += 1
        case = ET.SubElement(suite, "testcase", classname="loading", name=fault.name)
        ET.SubElement(case, "failure", message=f"not loaded as in the checkpoint: {fault.kind}",
                      type="loading").text = f"{fault.evidence}; fix: {fault.fix}"
    for name, what in problems:
        failures += 1
        case = ET.SubElement(suite, "testcase", classname="structure", name=name)
        ET.SubElement(case, "failure", message=what, type="structure")
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    out = [text for text, _ in statistics_lines(comparison)]
    out += [f"{d.rule} {d.title}: {d.evidence}\n  fix: {d.fix}" for d in diagnoses]
    first = comparison.first_divergence_name
    if first is not None:
        out.insert(0, f"first divergence: {first}")
    ET.SubElement(suite, "system-out").text = "\n".join(out)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _stage(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else name

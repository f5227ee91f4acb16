"""What one side does not record, or records under another name, that the comparison needs, each named with its
fix: the findings the table prints without a rule number, beside the diagnoses (`burnside.report.table` renders
them)."""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.compare.pairing import pair_renamed, rename_rules
from burnside.trace import parse_name


def by_buffer(names: list[str]) -> dict[str, int]:
    """Buffer name (without step and stage) -> how many steps record it, in first-seen order."""
    found: dict[str, int] = {}
    for name in names:
        parsed = parse_name(name)
        if parsed is not None:
            found[parsed.rest] = found.get(parsed.rest, 0) + 1
    return found


def buffer_findings(comparison: Comparison, only_a: list[str], only_b: list[str]) -> list[str]:
    """A persistent buffer one side records and the other does not, named for what it is with its fix."""
    found = []
    for side, other, names in (("A", "B", only_a), ("B", "A", only_b)):
        held = [n for n in names if n in comparison.missing_buffers(side.lower())]
        for buffer, count in by_buffer(held).items():
            found.append(
                f"buffer only in {side}: {buffer} ({count} {comparison.unit}(s)) is a persistent buffer, state the "
                f"model's state_dict holds (not a constant registered with persistent=False), and {other} does not "
                "record it: hold it in the port as the matching burn module's state (BatchNorm's running statistics "
                f"are recorded as buffers), loaded from the init file (`init.buffer(\"{buffer}\")`); a constant the "
                "port computes inline is registered in PyTorch with `register_buffer(..., persistent=False)`")
    return found


def renamed_findings(pairs: list) -> list[str]:
    """Tensors only one side records whose names map onto the other's by one renaming rule: record them under A's
    names."""
    return [f"named differently: A {a_name} ↔ B {b_name}? ({count} tensors); record B's tensors under A's names "
            "(a name mapping in the burn recorder)" for a_name, b_name, count in rename_rules(pairs)]


def renamed_tap_findings(comparison: Comparison) -> list[str]:
    """A layer tapped under another name than PyTorch's module path is not compared at all: say so, with the tap."""
    tapped, _, _ = pair_renamed(comparison.unrecorded_in_b, comparison.unrecorded_in_a)
    return [f"tapped under another name? A records the layer {a_name}, B {b_name} ({count} {comparison.unit}(s)), so "
            f"it is not compared: name the tap by the PyTorch module's path, tap.activation(\"{a_name}\", &x)"
            for a_name, b_name, count in rename_rules([p for p in tapped if ".activations." in p.a])]


def untapped_finding(comparison: Comparison) -> str | None:
    """When B records no layer output where A records some: what the verdict then rests on. A port tried as a user
    would, with one LayerNorm's epsilon 1e-5 for 1e-6 and no tap, passed: its output was 12x further from the float64
    reference than PyTorch's, inside the noise band, and no layer's measure could name the epsilon."""
    a_layers = [n for n in comparison.unrecorded_in_b if ".activations." in n]
    if not a_layers or any(r.stage == "activations" for r in comparison.rows):
        return None
    modules = list(dict.fromkeys(p.rest for n in a_layers if (p := parse_name(n)) is not None))
    module = modules[0] if modules else "layer"
    why = (f"its forward pass was not captured ({comparison.capture_off}) and it taps no layer"
           if comparison.capture_off
           else "it taps no layer")
    return (f"B records no layer ({why}; A records the outputs of {len(modules)}): only the outputs are judged, so a "
            "fault whose effect on them stays within rounding's noise band passes unseen and no cause can be measured; "
            "record an inference port with `Inference` on the Flex device without autodiff, which captures every "
            f"layer, or tap each layer by its PyTorch module path, tap.activation(\"{module}\", &x)")

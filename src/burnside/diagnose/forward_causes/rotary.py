"""A rotary embedding's table of other positions, or of RoPE's other layout, theta or frequency scaling
(`forensics.positions`)."""

from __future__ import annotations

from burnside.compare import Comparison


def positioned_otherwise(comparison: Comparison, first, positions, after: str, kind: str | None) -> tuple[str, str]:
    """A rotary embedding whose table is of other positions (`forensics.positions`): B's read back from its rows."""
    b_name = comparison.side_name("b")
    theirs = ", ".join(map(str, positions.b))
    ours = ", ".join(map(str, positions.a))
    restarted = positions.b and positions.b[0] == 0 and positions.a and positions.a[0] > 0
    offset = (positions.b[0] - positions.a[0]) if positions.b and positions.a else None
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s "
                f"{positions.module} ({kind or 'rotary embedding'}) computes the table of positions [{theirs}] where "
                f"PyTorch's is of positions [{ours}] (the batch's position_ids); each row of {b_name}'s output is A's "
                "row of that position")
    if restarted:
        fix = (f"count the positions of a step after the cache from the cache's length, as the PyTorch loop does: at "
               f"step {positions.step}, positions {ours}, the batch's `position_ids` (`batch.int_input::<2>"
               "(\"position_ids\")`), not from 0; a decode step's rotary angles are those of its place in the whole "
               "sequence")
    elif offset:
        fix = (f"give {positions.module} the positions the PyTorch loop does (the batch's `position_ids`, "
               f"[{ours}]): {b_name}'s are {offset:+d} off")
    else:
        fix = f"give {positions.module} the positions the PyTorch loop does (the batch's `position_ids`, [{ours}])"
    return evidence, fix


def rope_otherwise(comparison: Comparison, first, rope, after: str, kind: str | None) -> tuple[str, str]:
    """A rotary table of another layout or theta (`forensics.positions.measure_rope_form`), fitted on each side."""
    b_name = comparison.side_name("b")
    said = lambda form: f"{form[0]} with theta {form[1]:g}" + (  # noqa: E731
        f" and its frequencies scaled ({form[2]})" if form[2] else "")
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {rope.module} "
                f"({kind or 'rotary embedding'}) computes RoPE's table as {said(rope.b)} where PyTorch's is "
                f"{said(rope.a)} (each fitted on the step's positions: the cos of position x frequency, the "
                "frequencies theta^(-2i/d) laid out in two halves for rotate_half, in pairs for interleaved)")
    fixes = []
    if rope.a[0] != rope.b[0]:
        fixes.append("rotate as PyTorch's model does, rotate_half (x[i] with x[i + d/2], the frequencies in two "
                     "halves), not interleaved pairs (x[2i] with x[2i+1]) as burn's `RotaryEncoding` does: write "
                     "rotate_half by hand (`cat([-x2, x1])` of the two halves) or permute q's and k's features to "
                     "interleaved order before `RotaryEncoding` and back after"
                     if rope.a[0] == "rotate_half" else
                     "rotate interleaved pairs (x[2i] with x[2i+1]) as PyTorch's model does (burn's `RotaryEncoding`), "
                     "not rotate_half")
    if rope.a[1] != rope.b[1]:
        fixes.append(f"use RoPE's theta {rope.a[1]:g} as PyTorch's config does (`rope_theta`), not {rope.b[1]:g}: "
                     f"`RotaryEncodingConfig::new(max_len, head_dim).with_theta({rope.a[1]:g}.0)`, or the inverse "
                     f"frequencies 1 / {rope.a[1]:g}^(2i/d) by hand")
    if rope.a[2] and not rope.b[2]:
        fixes.append(f"scale RoPE's inverse frequencies as PyTorch's config does (`rope_scaling`, {rope.a[2]}: its "
                     f"lowest frequencies divided by {rope.factor:.4g}, the highest left as theta^(-2i/d), those "
                     "between blended), not theta^(-2i/d) alone: compute them as transformers' rope initialisation "
                     f"for {rope.a[2]} does (for llama3: factor, low_freq_factor, high_freq_factor and "
                     "original_max_position_embeddings of the config), or read them from the checkpoint's config "
                     "and build the table from those frequencies")
    elif rope.b[2] and not rope.a[2]:
        fixes.append("leave RoPE's inverse frequencies unscaled, theta^(-2i/d), as PyTorch's config does (no "
                     "`rope_scaling`)")
    return evidence, "; ".join(fixes)

"""An embedding that looks up other rows of the same weight (`forensics.lookups`): offset positions, another input's
ids, clipped ids."""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.trace import parse_name


def _ids_of(name: str) -> str:
    """A recorded id tensor as a person reads it: `the batch's token_type_ids`, `the ids x.wte is fed`."""
    parsed = parse_name(name)
    if parsed is not None and parsed.stage == "inputs":
        return f"the batch's `{parsed.rest}`"
    return f"the ids {parsed.rest if parsed is not None else name} is fed"


def looked_up_otherwise(comparison: Comparison, first, lookup, after: str, kind: str | None) -> tuple[str, str]:
    """An embedding that looks up other rows of the same weight (`forensics.lookups`): B's ids read back from its
    output, beside A's."""
    from burnside.forensics.lookups import shown

    module, b_name = lookup.module, comparison.side_name("b")
    positions = "position" in module.rsplit(".", 1)[-1].lower()
    what = "positions" if positions else "ids"
    ours, theirs = shown(lookup.a_ids), shown(lookup.b_ids)
    source = ("what A recorded feeding it" if lookup.a_source != "output" else "read back from A's output the same way")
    relation = {"offset": f"offset {lookup.offset:+d}", "input": f"{b_name}'s are {_ids_of(lookup.other)}",
                "clipped": f"A's clipped at {lookup.bound}", "other": ""}[lookup.how]
    evidence = (f"{first.name} differs (max|diff|={first.stats.max_abs:.3g}) while {after}: {b_name}'s {module} "
                f"({kind or 'Embedding'}) looks up other rows of the same weight: {b_name} looks up {what} {theirs} "
                f"where A's looks up {ours}{f' ({relation})' if relation else ''}. Each row of {b_name}'s output is a "
                f"row of the weight bit for bit, which gives the ids it looked up; A's are {source}")
    run = ".." in ours
    start = int(lookup.a_ids.reshape(-1)[0])
    arange = (f"`Tensor::<1, Int>::arange({start}..seq as i64{f' + {start}' if start else ''}, &device)` "
              "(reshaped to [1, seq] and expanded over the batch)")
    if lookup.how == "offset" and positions and run:
        fix = (f"count the positions from {start} as the PyTorch forward does, not from {start + lookup.offset}: "
               f"{module}'s ids are {arange}; with the offset every token gets the embedding of the position "
               f"{'after' if lookup.offset > 0 else 'before'} its own (an offset such as RoBERTa's padding_idx + 1 "
               "belongs to that model's position ids, not to this one's)")
    elif lookup.how == "offset":
        fix = (f"feed {module} the ids the PyTorch forward does: {b_name} adds {lookup.offset:+d} to them "
               f"({theirs} where PyTorch's are {ours})")
    elif lookup.how == "input":
        wanted = f"the position ids {ours}, {arange}" if positions and run else f"the ids {ours} ({lookup.a_source})"
        fix = (f"feed {module} {wanted}, as the PyTorch forward does, not {_ids_of(lookup.other)}: another "
               "input's ids passed in its place")
    elif lookup.how == "clipped":
        fix = (f"feed {module} the ids unclipped, as the PyTorch forward does: {b_name} clamps them at "
               f"{lookup.bound} (a `clamp`, or ids cut to a smaller vocabulary); the weight has {lookup.rows} rows")
    else:
        fix = (f"feed {module} the ids the PyTorch forward does ({ours}), not {theirs}: compare the code that makes "
               "them (the ids of another input, an offset or a slice)")
    return evidence, fix

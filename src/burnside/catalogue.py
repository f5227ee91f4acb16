"""What burn 0.22.1 is known to compute otherwise than PyTorch, layer by layer, as `burnside conformance`
measured it (each entry names the conformance case that shows it, so the suite re-measures it).

Two kinds of entries, used in two places:

- ``default``: a setting whose default differs (burn's `RmsNormConfig` epsilon 1e-5, PyTorch's `finfo.eps`).
  A port that takes burn's default computes otherwise than its PyTorch model: that is the port's to fix, so
  the diagnosis of a divergence at such a layer (D010, D011, D013) says, after its own evidence, which known
  defaults the layer's class has and how to set PyTorch's.
- ``framework``: burn's own arithmetic, which no setting changes. A correct port computes it, so it must not
  fail: the float64 referee models it (a `burnside.reference` variant) and names it, as it names Adam's f32
  constants and BatchNorm's biased running variance; the entry says which variant.
"""

from __future__ import annotations

from dataclasses import dataclass

from burnside.trace import parse_name


@dataclass(frozen=True)
class KnownDifference:
    """One difference of burn's from PyTorch's, measured by the conformance case ``case``."""

    case: str  # the conformance case id that measures it
    modules: tuple[str, ...]  # the PyTorch classes it concerns (a trace's metadata `modules`)
    kind: str  # "default" or "framework"
    cause: str
    fix: str = ""
    variant: str = ""  # for a framework difference: the referee's variant that models it
    #: for a default: the burn setter that sets it (``with_epsilon``); a diagnosis whose fix calls it already
    #: gives it, so the note leaves the entry out
    setter: str = ""


CATALOGUE: tuple[KnownDifference, ...] = (
    KnownDifference("rms_norm/default", ("RMSNorm",), "default",
                    "burn's RmsNormConfig epsilon defaults to 1e-5, PyTorch's nn.RMSNorm(eps=None) uses "
                    "torch.finfo(float32).eps (1.1920929e-7)",
                    "`RmsNormConfig::new(d).with_epsilon(1.1920929e-7)`", setter="with_epsilon"),
    KnownDifference("batch_norm2d/train", ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d"), "framework",
                    "burn's BatchNorm updates running_var with the biased batch variance (divided by n), PyTorch "
                    "with the unbiased one (divided by n - 1)", variant="burn-batchnorm"),
)


def known_for(module_class: str | None, kind: str | None = None) -> list[KnownDifference]:
    """The catalogue's entries for a PyTorch class (of ``kind`` when given)."""
    return [k for k in CATALOGUE if module_class in k.modules and (kind is None or k.kind == kind)]


def diverging_class(comparison) -> tuple[str | None, str | None]:
    """The module path and PyTorch class of the layer where ``comparison`` first diverges (None, None when the
    first divergence is no layer's output or input)."""
    first = comparison.first_divergence
    parsed = parse_name(first.name) if first is not None else None
    if parsed is None or parsed.stage not in ("activations", "layer_inputs"):
        return None, None
    module = parsed.rest.split("#", 1)[0]
    modules = comparison.a.metadata.get("modules")
    kind = modules.get(module) if isinstance(modules, dict) else None
    return module, kind if isinstance(kind, str) else None


def default_note(comparison, fix: str = "") -> str:
    """A sentence on the known defaults of the layer where ``comparison`` first diverges, leaving out those
    ``fix`` (a diagnosis' fix) already sets ("" when none is left)."""
    module, kind = diverging_class(comparison)
    known = [k for k in known_for(kind, "default") if not (k.setter and f".{k.setter}(" in fix)]
    if not known:
        return ""
    each = "; ".join(f"{k.cause}" + (f" (set it: {k.fix})" if k.fix else "") for k in known)
    return (f" Known default{'s' if len(known) > 1 else ''} of burn's twin of {kind} "
            f"(burnside conformance {', '.join(k.case for k in known)}): {each}.")

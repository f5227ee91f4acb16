"""What burn 0.22.1 is known to compute otherwise than PyTorch, as `burnside conformance` measured it: each entry
names the conformance case that shows it and the PyTorch classes it concerns; what it is (kind, cause, fix) is
that case's confirmed hypothesis (`burnside.conformance.cases`), so the suite re-measures every entry (the CI
subset holds every catalogued case).

The kinds, and where verdicts use them:

- ``default``: a setting whose default differs (burn's `RmsNormConfig` epsilon 1e-5, PyTorch's `finfo.eps`). A
  port that takes burn's default computes otherwise than its PyTorch model: the port's to fix, so the diagnosis
  of a divergence at such a layer, loss or optimizer says, after its own evidence, which known defaults it has
  and how to set PyTorch's (leaving out one the diagnosis already sets).
- ``framework``: burn's own arithmetic or a missing option. Where it is arithmetic a correct port computes too
  (Adam's f32 constants, BatchNorm's biased running variance), the float64 referee models it (``variant``) and
  names it without failing the port; elsewhere (an activation's gradient at its kink, no ``padding_idx``) the
  diagnosis of a divergence there names it as burn's, with the workaround.
- ``not comparable``: a burn bug that stops the port (a panic, a wrong shape), written up in docs/burn-issues.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from burnside.optimizers import OPTIMIZERS
from burnside.trace import parse_name


@dataclass(frozen=True)
class KnownDifference:
    """One difference of burn's from PyTorch's, measured by the conformance case ``case``."""

    case: str  # the conformance case id whose confirmed hypothesis it is
    modules: tuple[str, ...]  # the PyTorch classes (or loss functions) it concerns, as a trace's metadata names them
    #: for a default: the burn setter that sets it (``with_epsilon``); a diagnosis whose fix calls it already gives it
    setter: str = ""
    variant: str = ""  # a framework difference the float64 referee models: its variant
    #: a difference of the backward pass only (the forward agrees): D019 lists it for a model using the class
    backward: bool = False
    #: an optimizer's default: burn's value of each setting it concerns, by the trace's optimizer key (``eps``)
    burn_values: tuple[tuple[str, float], ...] = ()

    @property
    def kind(self) -> str:
        return "framework" if self.variant else self._hypothesis()[0]

    @property
    def cause(self) -> str:
        if self.variant:
            from burnside.compare.referee import VARIANT_TITLES

            return VARIANT_TITLES[self.variant]
        return self._hypothesis()[1]

    @property
    def fix(self) -> str:
        return "" if self.variant else self._hypothesis()[2]

    def _hypothesis(self) -> tuple[str, str, str]:
        return _hypotheses()[self.case]


@cache
def _hypotheses() -> dict[str, tuple[str, str, str]]:
    """Each case's first hypothesis (kind, cause, fix); imported when a note is written (it imports torch)."""
    from burnside.conformance.cases import all_cases

    return {c.id: (c.hypotheses[0].kind, c.hypotheses[0].cause, c.hypotheses[0].fix) for c in all_cases()
            if c.hypotheses}


_NORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")

CATALOGUE: tuple[KnownDifference, ...] = (
    # defaults
    KnownDifference("rms_norm/default", ("RMSNorm",), "with_epsilon"),
    KnownDifference("instance_norm1d/default", ("InstanceNorm1d", "InstanceNorm2d"), "with_affine"),
    KnownDifference("interpolate2d/bilinear-default", ("Upsample",), "with_align_corners"),
    KnownDifference("hard_sigmoid/default", ("Hardsigmoid",), "with_alpha"),
    KnownDifference("lstm/default", ("LSTM", "RNN"), "with_batch_first"),
    KnownDifference("multihead_attention/default", ("MultiheadAttention",), "with_dropout"),
    KnownDifference("transformer_encoder_layer/default", ("TransformerEncoderLayer", "TransformerEncoder"),
                    "with_dropout"),
    KnownDifference("transformer_encoder_layer/activation", ("TransformerEncoderLayer", "TransformerEncoder"),
                    "with_activation"),
    KnownDifference("kl_div/default", ("KLDivLoss", "kl_div"), "Reduction::"),
    # each optimizer's burn defaults that differ from PyTorch's (`Optimizer.burn_defaults`)
    *(KnownDifference(o.burn_defaults[0], (o.torch_class,), o.burn_defaults_setter, burn_values=o.burn_defaults[1])
      for o in OPTIMIZERS.values() if o.burn_defaults is not None),
    # framework: modelled by the referee
    KnownDifference("batch_norm2d/train", _NORMS, variant="burn-batchnorm"),
    KnownDifference("adam/default", ("Adam", "AdamW"), variant="burn-adam"),
    KnownDifference("muon/square", ("Muon",), variant="burn-muon"),
    # framework: named where a port diverges
    KnownDifference("batch_norm2d/no-affine", _NORMS),
    KnownDifference("conv2d/padding-reflect", ("Conv1d", "Conv2d")),
    KnownDifference("interpolate2d/bilinear-scale1p5", ("Upsample",)),
    KnownDifference("interpolate2d/bilinear-antialias", ()),  # F.interpolate(antialias=True): no module to name
    KnownDifference("rotary_encoding/rotate-half", ()),  # PyTorch has no rotary module: a port's own code
    KnownDifference("gru/reset-before", ("GRU",)),
    KnownDifference("local_response_norm/size-2", ("LocalResponseNorm",)),
    KnownDifference("embedding/padding-idx", ("Embedding",), backward=True),
    KnownDifference("embedding/max-norm", ("Embedding",)),
    KnownDifference("relu6/kinks", ("ReLU6",), backward=True),
    KnownDifference("hardtanh/kinks", ("Hardtanh",), backward=True),
    KnownDifference("hard_sigmoid/kinks", ("Hardsigmoid",), backward=True),
    KnownDifference("hard_swish/kinks", ("Hardswish",), backward=True),
    KnownDifference("leaky_relu/kinks", ("LeakyReLU",), backward=True),
    KnownDifference("prelu/kinks", ("PReLU",), backward=True),
    KnownDifference("selu/kinks", ("SELU",), backward=True),
    KnownDifference("gru/default", ("GRU",)),
    KnownDifference("multihead_attention/all-keys-masked", ("MultiheadAttention",)),
    KnownDifference("transformer_encoder_layer/norm-first", ("TransformerEncoderLayer", "TransformerEncoder")),
    KnownDifference("transformer_decoder/norm-first", ("TransformerDecoderLayer", "TransformerDecoder")),
    KnownDifference("triplet_margin_loss/anchor-is-positive", ("TripletMarginLoss", "triplet_margin_loss"),
                    backward=True),
    KnownDifference("adagrad/initial-accumulator", ("Adagrad",)),
    KnownDifference("muon/default", ("Muon",)),
    # burn bugs that stop a port
    KnownDifference("conv1d/same-dilation2", ("Conv1d", "Conv2d")),
    KnownDifference("interpolate2d/nearest-exact", ("Upsample",)),
)


def known_for(name: str | None) -> list[KnownDifference]:
    """The catalogue's entries for a PyTorch class or loss function (case-insensitive: an optimizer's metadata
    names it in lower case)."""
    if not name:
        return []
    name = name.lower()
    return [k for k in CATALOGUE if name in (m.lower() for m in k.modules)]


def diverging_class(comparison) -> str | None:
    """The PyTorch class of the layer where ``comparison`` first diverges (None when the first divergence is no
    layer's output or input, or the trace does not name the class)."""
    first = comparison.first_divergence
    return comparison.module_class(first.name) if first is not None else None


def _loss_name(comparison) -> str | None:
    call = comparison.a.metadata.get("loss_call")
    name = call.get("fn") if isinstance(call, dict) else None
    fn = comparison.a.metadata.get("loss_fn")
    return name if isinstance(name, str) else fn if isinstance(fn, str) else None


def _loss_of_divergence(comparison) -> str | None:
    """The loss function, when ``comparison`` first diverges at the loss or its inputs."""
    first = comparison.first_divergence
    parsed = parse_name(first.name) if first is not None else None
    return _loss_name(comparison) if parsed is not None and parsed.stage in ("loss", "loss_inputs") else None


def _rerun_rules_out(known: KnownDifference, comparison) -> bool:
    """Any layer default where forensics re-ran the layer with A's settings and found what B read or masked otherwise:
    the layer re-run with A's settings reproduced B's output but for what it read or one attention's masks
    (`forensics.reads`, `forensics.transformer_layer`), so its class's other defaults are not what differs."""
    if known.burn_values:
        return False
    from burnside.forensics import evidence_of

    found = evidence_of(comparison)
    return (found.masks is not None and found.masks.b is not None) or (found.reads is not None
                                                                        and found.reads.b is not None)


def _optimizer_name(comparison) -> str | None:
    optimizer = comparison.a.metadata.get("optimizer")
    name = optimizer.get("name") if isinstance(optimizer, dict) else None
    return name if isinstance(name, str) else None


@dataclass(frozen=True)
class Subject:
    """What a diagnosis is about, as the catalogue reads it: ``about`` names it (a PyTorch class, a loss function,
    an optimizer) and ``rules_out`` drops an entry the diagnosis's own evidence excludes, before the checks every
    subject shares (`_ruled_out`)."""

    about: Callable[[object], str | None]
    rules_out: Callable[[KnownDifference, object], bool] = lambda known, comparison: False


#: The subjects a diagnosis rule can name in its ``CATALOGUE``: the notes it gains are this subject's entries.
SUBJECTS: dict[str, Subject] = {
    # the diverging layer's class
    "layer": Subject(diverging_class),
    # the diverging layer's class or the loss, less the layer defaults a re-run of the layer rules out
    "layer or loss": Subject(lambda c: diverging_class(c) or _loss_of_divergence(c), _rerun_rules_out),
    "loss": Subject(_loss_name),
    # an optimizer default only where the port declares one of burn's values (the declared settings are judged)
    "declared optimizer": Subject(_optimizer_name,
                                  lambda k, c: bool(k.burn_values) and not _declares_burn_value(k, c)),
    # an optimizer default only where the updates show one of burn's values (they may not follow the declaration)
    "updating optimizer": Subject(_optimizer_name,
                                  lambda k, c: bool(k.burn_values) and not _shows_burn_value(k, c)),
}


def _ruled_out(known: KnownDifference, comparison, subject: Subject) -> bool:
    """Whether ``known`` cannot be the cause a diagnosis about ``subject`` names: what the subject's own evidence
    excludes (`Subject.rules_out`), and what the diverging layer as measured on A (`burnside.compare.layers.settings`)
    cannot meet: a convolution measured by its zero-padded formula pads with zeros (so no reflect padding), and one
    of dilation 1 meets no dilation bug; an embedding whose ids are read back from its rows (`forensics.lookups`)
    looked up other rows, as they are."""
    if subject.rules_out(known, comparison):
        return True
    if known.burn_values:
        return False
    if known.case == "batch_norm2d/no-affine":
        # of a PyTorch BatchNorm(affine=False) only: one whose weight A's trace holds has the affine burn's has
        first = comparison.first_divergence
        parsed = parse_name(first.name) if first is not None else None
        params = comparison.a.metadata.get("params")
        return parsed is not None and isinstance(params, list) and f"{parsed.rest.split('#', 1)[0]}.weight" in params
    if known.case in ("embedding/padding-idx", "embedding/max-norm"):
        # the embedding's ids read back from each side's output (`forensics.lookups`): rows of the weight as they
        # are, no renormalisation, and the rows the ids name, padding or not: another lookup, not these
        from burnside.forensics import evidence_of

        lookup = evidence_of(comparison).lookup
        first = comparison.first_divergence
        return lookup is not None and first is not None and first.name.endswith(f"activations.{lookup.module}")
    if known.case not in ("conv2d/padding-reflect", "conv1d/same-dilation2", "lstm/default", "gru/default"):
        return False
    from burnside.forensics import evidence_of

    layer = evidence_of(comparison).layer
    first = comparison.first_divergence
    if layer is None or first is None or f"activations.{layer.module}" not in first.name:
        return False
    a = layer.measured.get("a") or {}
    if known.case in ("lstm/default", "gru/default"):
        # burn's batch-first reading is PyTorch's batch_first=True: no difference where A reads batch-first
        return a.get("layout") == "batch-first"
    if "padding" not in a:
        return False  # A's convolution not reproduced by zero padding: reflect padding is still possible
    if known.case == "conv2d/padding-reflect":
        return True
    return set(str(a.get("dilation", "")).strip("()").replace(" ", "").split(",")) == {"1"}


def _declares_burn_value(known: KnownDifference, comparison) -> bool:
    """Whether B's declared optimizer holds one of burn's default values of ``known`` where A's does not (as f32:
    burn keeps them so), in its settings or a parameter group's."""
    def settings(optimizer) -> list[dict]:
        if not isinstance(optimizer, dict):
            return []
        groups = optimizer.get("groups")
        return [optimizer, *(g for g in groups if isinstance(g, dict))] if isinstance(groups, list) else [optimizer]

    def near(value: object, target: float) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and \
            abs(float(value) - target) <= 1e-6 * max(abs(target), 1e-12)

    a, b = settings(comparison.a.optimizer), settings(comparison.b.optimizer)
    for key, burn in known.burn_values:
        a_values = [s.get(key) for s in a]
        if any(near(s.get(key), burn) for s in b) and not any(near(v, burn) for v in a_values):
            return True
    return False


def _shows_burn_value(known: KnownDifference, comparison) -> bool:
    """Whether a side's updates show one of burn's default values of ``known`` (measured within 5%), or a replay with
    all of them reproduces its updates (`OptimizerForensics.burn_defaults`)."""
    from burnside.forensics import evidence_of

    evidence = evidence_of(comparison)
    for side in ("a", "b"):
        found = evidence.optimizer(side)
        if found is None:
            continue
        if found.burn_defaults is not None and found.burn_defaults[0] == known.case:
            return True
        for key, burn in known.burn_values:
            for measured in (found.measured.get(k) for k in (key, f"{key}_decoupled", f"{key}_l2")):
                if isinstance(measured, (int, float)) and abs(measured - burn) <= 0.05 * abs(burn) + 1e-12:
                    return True
    return False


def note_for(subject: str, comparison, fix: str) -> str:
    """The sentence a diagnosis about ``subject`` (a rule's ``CATALOGUE``, a key of `SUBJECTS`; "" for none) gains:
    the known differences of what it is about (the diverging layer's class, the loss, the optimizer), leaving out a
    default ``fix`` already sets and a difference the referee models ("" when none is left)."""
    if not subject:
        return ""
    about = SUBJECTS[subject]
    name = about.about(comparison)
    known = [k for k in known_for(name) if not k.variant and not (k.setter and k.setter in fix)
             and not _ruled_out(k, comparison, about)]
    if not known:
        return ""
    each = "; ".join(k.cause + (f" (fix: {k.fix})" if k.fix else "") for k in known)
    return (f" Known difference{'s' if len(known) > 1 else ''} of burn's twin of {name} "
            f"(burnside conformance {', '.join(k.case for k in known)}): {each}.")

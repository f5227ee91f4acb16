"""What the layer at the first divergence read on side B: an activation left out, added or of another form
before it, or a residual left out or added, measured by re-running the layer on what A recorded.

At the first divergence, a layer whose own settings agree (D011 measured none apart) and whose output on B is
not its formula of A's recorded input was fed something else: the code between the tap before it and the layer
computes otherwise. The candidates for what B fed it are built from A's tensors recorded before the layer runs
at that step (module outputs, module inputs, the batch's float inputs, all of the layer input's shape; the
nearest `POOL` of them, each value once): each as it is, under each activation of `FUNCTIONS`, and the sum of
each two (a residual). Each is run through the layer with B's own parameters; the one that reproduces B's output
within rounding (`layer_fit.VALID`), with every other over 10 times further off, is what B read. The same
candidates say what A's recorded input is (within VALID of it), so the finding names both sides:
``fc2`` reads ``fc1`` (B) where it reads ``gelu(fc1)`` (A).

The layers re-run: Linear (``x W^T + b`` over the last axis), LayerNorm and RMSNorm (with the epsilon that best
reproduces A's own output, of the usual ones), Conv1d and Conv2d (with the stride, padding and dilation
measured on A, `conv`). Every formula is first validated on A: it must reproduce A's output from A's recorded
input, or nothing is measured. Only slices are read: the first `ROWS` rows (Linear, norms), the first sample
and `conv.CHANNELS` output channels (convolutions).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from burnside.compare.layers import conv
from burnside.forensics import attention
from burnside.forensics.attention import Variant
from burnside.compare.layers.layer_fit import (
    ACTIVATIONS,
    FLOATS,
    VALID,
    params_step,
    read,
    relative,
)
from burnside.compare.layers.norms import EPSILONS, F32_EPS, RMSNORM
from burnside.trace import Trace, parse_name

KINDS = ("Linear", "LayerNorm", RMSNORM, *conv.KINDS)
#: Rows of a Linear's or norm's input re-run per candidate (the first ones, leading axes flattened).
ROWS = 16
#: Recorded tensors of the input's shape tried, the nearest before the layer in A's execution order.
POOL = 8

#: The elementwise activations a forward applies between layers (`layer_fit.ACTIVATIONS`), by the name the
#: finding shows, with what a person reads for it.
FUNCTIONS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    name: (said, ACTIVATIONS[name]) for name, said in (
        ("relu", "a ReLU"), ("gelu", "a GELU (erf form)"), ("gelu_tanh", "a GELU (tanh approximation)"),
        ("silu", "a SiLU"), ("tanh", "a tanh"), ("sigmoid", "a sigmoid"), ("leaky_relu", "a leaky ReLU (slope 0.01)"),
        ("elu", "an ELU"))
}


#: The scales of a log-variance's exponent a reparameterisation is tried with (`_candidates`).
REPARAM_SCALES = ("0.5", "1")


@dataclass(frozen=True)
class Operand:
    """One recorded tensor of A's, as a finding names it."""

    name: str  # `step0.activations.fc1`
    shown: str  # `fc1` (a module's output), `fc1's input`, `input x`


@dataclass(frozen=True)
class Candidate:
    """What a layer may read: ``function(operand)``, or the sum of two operands (``function`` None)."""

    operands: tuple[Operand, ...]
    function: str | None = None
    #: an attention of the operands (a packed q, k, v, or q, k and v), and its width
    attention: Variant | None = None
    d_model: int = 0

    def shown(self) -> str:
        """`gelu(fc1)`, `fc1`, `blocks.0's input + blocks.0.attn`, `attention of c_attn (4 heads, ...)`."""
        if self.attention is not None:
            return f"attention of {', '.join(o.shown for o in self.operands)} ({self.attention.shown(self.d_model)})"
        if self.function is not None and self.function.startswith("halves:"):
            return f"{self.operands[0].shown} with its two halves in the other order"
        if self.function is not None and self.function.startswith("reparam:"):
            mean, noise, log_var = (o.shown for o in self.operands)
            scale = self.function.removeprefix("reparam:")
            return f"{mean} + {noise} * exp({'' if scale == '1' else scale + ' * '}{log_var})"
        if self.function is not None:
            return f"{self.function}({self.operands[0].shown})"
        return " + ".join(o.shown for o in self.operands)


@dataclass
class LayerReads:
    """What the layer at the first divergence read on each side, as A's recorded tensors express it."""

    module: str
    kind: str
    step: int
    input: str  # A's recorded input of the layer
    #: what B's layer read, and how far B's output is from the layer of it (relative); None: no candidate did
    b: Candidate | None
    b_residual: float
    #: A's recorded input as the same candidates express it (None: none is within rounding of it, e.g. a sum of
    #: three tensors), and the residual
    a: Candidate | None
    a_residual: float
    #: the candidates tried
    tried: int
    #: the module's own output is the attention (a Hugging Face self-attention module's context, before its output
    #: projection): the candidates are compared with it as they are, no layer re-run
    direct: bool = False

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "kind": self.kind, "step": self.step, "input": self.input,
                "b": self.b.shown() if self.b else None, "b_residual": self.b_residual,
                "a": self.a.shown() if self.a else None, "a_residual": self.a_residual, "tried": self.tried,
                "direct": self.direct}


def measure_reads(a: Trace, b: Trace, first: str) -> LayerReads | None:
    """What B's layer at the first divergence ``first`` (a layer's output) read, or None when it is no layer
    re-run here, A records no input of it, its formula does not reproduce A's own output from that input, or
    B's output is its formula of A's input after all (within rounding: nothing before the layer differs)."""
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    order = a.metadata.get("activations")
    if parsed is None or parsed.stage != "activations" or not isinstance(modules, dict) or not isinstance(order, list):
        return None
    module, k = parsed.rest, parsed.step
    kind = modules.get(module.split("#", 1)[0])
    source = f"step{k}.layer_inputs.{module}"
    if kind not in KINDS and module in order and first in a and first in b:
        with np.errstate(all="ignore"):
            return _attention_output(a, b, first, module, str(kind), k, order)
    if kind not in KINDS or module not in order or source not in a or first not in b or first not in a:
        return None
    if a.info(source).dtype not in FLOATS or a.info(first).shape != b.info(first).shape:
        return None
    # an output projection after an attention: rows that reach a padded sample, where a mask left out shows
    names = attention.sources(a, k, module, order, a.info(source).shape) if kind == "Linear" else None
    rows = attention.rows_needed(a, k, a.info(source).shape, ROWS) if names else ROWS
    with np.errstate(all="ignore"):  # a NaN or an overflow in a trace fails the fit, no more
        layer = _layer(a, b, kind, module, k, source, first, rows)
        if layer is None:
            return None
        x_a, y_b = layer.x_a, read(b, first, layer.out_part)
        if y_b is None or relative(y_b, layer.run_b(x_a)) <= 10 * VALID:
            return None  # B's layer computes A's output from A's input: rounding, nothing fed otherwise
        pool = _pool(a, k, module, order, source, layer.part)
        if kind == "Linear" and len(a.info(source).shape) == 2:
            # first: of two of one value, a token of the sequence is kept (`encoder's first token`, not the
            # `heads's input` it is), which says how each side reads the sequence
            pool = _token_reductions(a, k, module, order, a.info(source).shape, layer.part) + pool
        # those of the layer's own input last: of two of one value, `relu(fc1)` is kept (it says what A read), not
        # the input itself or `relu(fc2's input)`
        # a concatenation in the other order swaps the halves of the feature axis (a Linear's last, a conv's channels)
        axis = 1 if kind in conv.KINDS else -1
        candidates = sorted(_candidates(pool, axis), key=lambda c: any(o.name == source for o in c.operands))
        if not candidates:
            return None
        values: dict[Candidate, np.ndarray] = {}
        pooled = {o.name: v for o, v in pool}
        for candidate in candidates:  # one of each value, the simplest kept (`relu(h)` of an h >= 0 is h)
            value = _value(candidate, pooled)
            if np.all(np.isfinite(value)) and not any(np.array_equal(value, v) for v in values.values()):
                values[candidate] = value
        if names:
            values.update(_attentions(a, k, names, a.info(source).shape, x_a, rows))
        b_fits = {c: _fit(y_b, layer.run_b(v)) for c, v in values.items()}
        a_fits = {c: _fit(x_a, v) for c, v in values.items()
                  if c.function is not None or len(c.operands) > 1 or c.operands[0].name != source}
    best_b = _unique(b_fits)
    # A's input said in the terms of what B read where it can be (`gelu(fc1)` beside B's `fc1`, not `act`)
    near = [c for c in a_fits if a_fits[c] <= VALID]
    def base(c: Candidate) -> set[str]:  # the recorded tensors read, a token reduction's as its sequence's
        return {o.name.split("|")[0] for o in c.operands}

    best_a = min(near, key=lambda c: (best_b is None or set(c.operands) != set(best_b.operands),
                                      best_b is None or base(c) != base(best_b), a_fits[c]), default=None)
    return LayerReads(module, kind, k, source,
                      best_b, b_fits[best_b] if best_b is not None else min(b_fits.values()),
                      best_a, a_fits[best_a] if best_a is not None else min(a_fits.values(), default=math.inf),
                      len(values))


@dataclass
class _Layer:
    """The layer as B's formula of an input slice (``part`` of the input, ``out_part`` of the output), its
    settings those that reproduce A's own output from A's input (``x_a``, the slice of it read)."""

    run_b: Callable[[np.ndarray], np.ndarray]
    part: Callable[[np.ndarray], np.ndarray]
    out_part: Callable[[np.ndarray], np.ndarray]
    x_a: np.ndarray


def _layer(a: Trace, b: Trace, kind: str, module: str, k: int, source: str, output: str,
           rows_read: int = ROWS) -> _Layer | None:
    """The layer re-run on B's parameters with the settings found on A, or None (its formula does not reproduce
    A's output from A's input, or the parameters do not fit it)."""
    x_shape = a.info(source).shape
    params = {side: tuple(read(t, f"step{params_step(t, k)}.params_before.{module}.{p}") for p in ("weight", "bias"))
              for side, t in (("a", a), ("b", b))}
    (w_a, bias_a), (w_b, bias_b) = params["a"], params["b"]
    if w_b is None:  # a port that records no parameters of it ran A's (the comparison found them equal)
        w_b, bias_b = w_a, bias_a
    if (w_a is None) != (w_b is None) or (w_a is not None and w_a.shape != w_b.shape):
        return None
    if kind == "Linear":
        if w_a is None or w_a.ndim != 2 or not x_shape or x_shape[-1] != w_a.shape[1]:
            return None
        rows = lambda v: v.reshape(-1, v.shape[-1])[:rows_read]
        formula = lambda w, bias: lambda x: x @ w.T + (bias if bias is not None else 0.0)
        forms = [formula]
        part = out_part = rows
    elif kind in ("LayerNorm", RMSNORM):
        size = w_a.size if w_a is not None else (x_shape[-1] if x_shape else 0)
        if size == 0 or math.prod(x_shape) % size:
            return None
        part = out_part = lambda v: v.reshape(-1, size)[:ROWS]
        rms = kind == RMSNORM

        def formula_at(eps: float):
            def formula(w, bias):
                w_row = w.reshape(1, size) if w is not None else 1.0
                b_row = bias.reshape(1, size) if bias is not None and not rms else 0.0

                def norm(x: np.ndarray) -> np.ndarray:
                    centered = x if rms else x - x.mean(axis=1, keepdims=True)
                    return centered / np.sqrt(np.mean(centered * centered, axis=1, keepdims=True) + eps) * w_row + b_row
                return norm
            return formula
        forms = [formula_at(eps) for eps in dict.fromkeys(((F32_EPS,) if rms else (1e-5,)) + EPSILONS)]
    elif kind in conv.KINDS:
        spatial = 1 if kind == "Conv1d" else 2
        if w_a is None or w_a.ndim != spatial + 2 or len(x_shape) != spatial + 2 or x_shape[1] % w_a.shape[1]:
            return None
        y_shape = a.info(output).shape
        groups = x_shape[1] // w_a.shape[1]
        channels = list(range(min(conv.CHANNELS, w_a.shape[0])))
        work = len(channels) * w_a.shape[1] * math.prod(w_a.shape[2:]) * math.prod(y_shape[2:])
        if work > conv.WORK:
            return None
        part, out_part = (lambda v: v[:1]), (lambda v: v[:1, :len(channels)])
        def convolution(settings: tuple):
            return lambda w, bias: lambda x: conv._conv(x, w, bias, groups, channels, *settings)
        forms = [convolution(settings)
                 for settings in conv._candidates(tuple(x_shape[2:]), tuple(w_a.shape[2:]), tuple(y_shape[2:]))]
    else:
        return None
    x_a, y_a = read(a, source, part), read(a, output, out_part)
    if x_a is None or y_a is None:
        return None
    for form in forms:  # the settings that reproduce A's own output (a norm's epsilon, a conv's stride)
        if relative(y_a, form(w_a, bias_a)(x_a)) <= VALID:
            return _Layer(form(w_b, bias_b), part, out_part, x_a)
    return None  # A's own layer is not reproduced from its recorded input: not this formula


def _pool(a: Trace, k: int, module: str, order: list, source: str,
          part: Callable[[np.ndarray], np.ndarray]) -> list[tuple[Operand, np.ndarray]]:
    """A's tensors of the layer input's shape recorded before the layer runs at step ``k``, nearest first, each
    value once (the first name kept: a module's output before another's input of the same value), `POOL` at
    most; the layer's own input among them."""
    shape = a.info(source).shape
    at = order.index(module)
    ancestors = {module.rsplit(".", n)[0] for n in range(1, module.count(".") + 1)} if "." in module else set()

    def started(m: str) -> float:
        """When module ``m`` starts in A's execution order: just before its first output, or its first child's."""
        inside = [i for i, other in enumerate(order) if other == m or other.startswith(m + ".")]
        return min(inside) - 0.5 if inside else math.inf

    timed: list[tuple[float, str, str]] = []
    for i, m in enumerate(order[:at]):
        timed.append((i, f"step{k}.activations.{m}", m))
    for m in order:
        if m != module and (m in ancestors or order.index(m) < at):
            timed.append((started(m), f"step{k}.layer_inputs.{m}", f"{m}'s input"))
    timed.append((at - 0.5, source, f"{module}'s input"))
    prefix = f"step{k}.inputs."
    for name in a.names:
        if name.startswith(prefix):
            timed.append((-1.0, name, f"input {name[len(prefix):]}"))
    def plain(name: str) -> int:
        """Of two names of one value, the one a person reads best: the input of a block the layer is in (what a
        residual adds back: `blocks.1's input`, not `blocks.0` or `blocks.1.ln1's input`), a module's output
        (`fc1`, not `act's input`), the batch's input, another module's input."""
        if ".layer_inputs." in name and name.split(".layer_inputs.", 1)[-1] in ancestors:
            return 0
        if ".activations." in name:
            return 1
        return 2 if name.startswith(prefix) else 3

    pool: list[tuple[Operand, np.ndarray]] = []
    for _, name, shown in sorted(timed, key=lambda t: -t[0]):
        if len(pool) >= POOL:
            break
        if name not in a or a.info(name).shape != shape or a.info(name).dtype not in FLOATS:
            continue
        value = read(a, name, part)
        if value is None:
            continue
        same = next((i for i, (_, kept) in enumerate(pool) if np.array_equal(value, kept)), None)
        if same is None:
            pool.append((Operand(name, shown), value))
        elif plain(name) < plain(pool[same][0].name):
            pool[same] = (Operand(name, shown), pool[same][1])
    return pool


#: How a head reads a sequence of token vectors: one token, or all of them reduced (`_token_reductions`).
TOKEN_READS = {"first": ("its first token", lambda x: x[:, 0]), "last": ("its last token", lambda x: x[:, -1]),
               "mean": ("its mean over the tokens", lambda x: x.mean(axis=1)),
               "max": ("its max over the tokens", lambda x: x.max(axis=1))}


def _token_reductions(a: Trace, k: int, module: str, order: list, shape: tuple[int, ...],
                      part: Callable[[np.ndarray], np.ndarray]) -> list[tuple[Operand, np.ndarray]]:
    """A Linear fed one vector per sample ([batch, width]) after layers that make one per token: the nearest two
    module outputs of [batch, tokens, width] recorded before it, each read as a classifier head reads a sequence
    (`TOKEN_READS`: the class token first, the last token, the mean or max over the tokens)."""
    found: list[tuple[Operand, np.ndarray]] = []
    for m in reversed(order[:order.index(module)]):
        if len(found) >= 2 * len(TOKEN_READS):
            break
        name = f"step{k}.activations.{m}"
        if name not in a or a.info(name).dtype not in FLOATS:
            continue
        got = a.info(name).shape
        if len(got) != 3 or got[0] != shape[0] or got[2] != shape[1] or got[1] < 2:
            continue
        value = read(a, name)
        if value is None:
            continue
        for how, (shown, reduce) in TOKEN_READS.items():
            found.append((Operand(f"{name}|{how}", f"{m}'s {shown.removeprefix('its ')}"), part(reduce(value))))
    return found


def _candidates(pool: list[tuple[Operand, np.ndarray]], axis: int = -1) -> list[Candidate]:
    """Each pooled tensor as it is, under each activation and with the two halves of its feature ``axis`` swapped
    (a concatenation in the other order: `cat([cos, sin])` for `cat([sin, cos])`, a skip connection's), and each
    two summed."""
    operands = [o for o, _ in pool]
    found = [Candidate((o,)) for o in operands]
    found += [Candidate((o,), f) for o in operands for f in FUNCTIONS]
    found += [Candidate((o,), f"halves:{axis}") for o, v in pool if v.ndim and v.shape[axis] % 2 == 0]
    found += [Candidate(pair) for pair in itertools.combinations(operands, 2)]
    # a VAE's reparameterisation, mean + noise * exp(scale * log-variance): the noise a batch input, the mean and the
    # log-variance module outputs; the scale 0.5 (the standard deviation of a log-variance) or 1 (its variance)
    noises = [o for o in operands if o.shown.startswith("input ")]
    outputs = [o for o in operands if ".activations." in o.name and "|" not in o.name]
    found += [Candidate((mean, noise, log_var), f"reparam:{scale}") for noise in noises
              for mean, log_var in itertools.permutations(outputs, 2) for scale in REPARAM_SCALES]
    return found


def _attentions(a: Trace, k: int, names: list[tuple[str, str]], x_shape: tuple[int, ...], x_a: np.ndarray,
                rows: int) -> dict[Candidate, np.ndarray]:
    """An attention's output projection: A's attention of the recorded q, k, v before it (``names``) and each
    variation of one of its settings, as candidates (`attention`); none when no attention of them is A's input."""
    found = attention.variants(a, names, x_a, x_shape, rows, k)
    if found is None:
        return {}
    _, outputs = found
    operands = tuple(Operand(name, shown) for name, shown in names)
    return {Candidate(operands, attention=v, d_model=x_shape[-1]): out for v, out in outputs.items()}


def _attention_output(a: Trace, b: Trace, first: str, module: str, kind: str, k: int,
                      order: list) -> LayerReads | None:
    """An attention module whose own output is the attention of its children (Hugging Face's `BertSelfAttention`:
    `query`, `key`, `value`, its output the heads' context before the output projection): B's output compared with
    A's attention of A's recorded children and each variation of one of its settings, as they are. None when the
    module has no such children, no attention of them is A's output, or B's output is A's within rounding."""
    shape = a.info(first).shape
    if a.info(first).dtype not in FLOATS or b.info(first).shape != shape:
        return None
    names = attention.sources(a, k, module, order, shape, within=True)
    if not names:
        return None
    rows = attention.rows_needed(a, k, shape, ROWS)
    part = lambda v: v.reshape(-1, v.shape[-1])[:rows]
    x_a, y_b = read(a, first, part), read(b, first, part)
    if x_a is None or y_b is None or relative(y_b, x_a) <= 10 * VALID:
        return None
    # the children named as the module's own (`query`, not `encoder.layer.0.attention.self.query`)
    values = _attentions(a, k, [(name, m.removeprefix(module + ".")) for name, m in names], shape, x_a, rows)
    if not values:
        return None
    own = next(iter(values))  # `attention.variants` gives A's own first
    b_fits = {c: _fit(y_b, v) for c, v in values.items()}
    best_b = _unique(b_fits)
    return LayerReads(module, kind, k, ", ".join(name for name, _ in names),
                      best_b, b_fits[best_b] if best_b is not None else min(b_fits.values()),
                      own, relative(x_a, values[own]), len(values), direct=True)


def _value(candidate: Candidate, values: dict[str, np.ndarray]) -> np.ndarray:
    """The candidate's value from the pooled tensors, by name."""
    if candidate.function is not None and candidate.function.startswith("halves:"):
        value = values[candidate.operands[0].name]
        axis = int(candidate.function.removeprefix("halves:"))
        return np.roll(value, value.shape[axis] // 2, axis=axis)
    if candidate.function is not None and candidate.function.startswith("reparam:"):
        mean, noise, log_var = (values[o.name] for o in candidate.operands)
        return mean + noise * np.exp(float(candidate.function.removeprefix("reparam:")) * log_var)
    if candidate.function is not None:
        return FUNCTIONS[candidate.function][1](values[candidate.operands[0].name])
    return sum((values[o.name] for o in candidate.operands[1:]), values[candidate.operands[0].name])


def _fit(actual: np.ndarray, expected: np.ndarray) -> float:
    """`relative` over the rows ``expected`` has a value for (an attention's query with every key masked has none:
    NaN, `attention.attend`); inf when it has none."""
    rows = np.all(np.isfinite(expected.reshape(expected.shape[0], -1)), axis=1) if expected.ndim else np.True_
    if expected.ndim and not np.any(rows):
        return math.inf
    return relative(actual[rows], expected[rows]) if expected.ndim and not np.all(rows) else relative(actual, expected)


def _unique(fits: dict[Candidate, float]) -> Candidate | None:
    """The candidate within rounding of the output while every other one of another value is over 10 times
    further off; None when none is, or two that differ fit alike."""
    ranked = sorted(fits, key=fits.__getitem__)
    if not ranked or fits[ranked[0]] > VALID:
        return None
    return ranked[0] if len(ranked) == 1 or fits[ranked[1]] > 10 * fits[ranked[0]] else None

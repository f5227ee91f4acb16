"""Trace metadata: the keys docs/trace-format.md defines, their types, and their text form in safetensors.

The same checks run when a trace is read (either form) and before one is written, so a file
burnside writes is always a file burnside reads, and a file it reads never surprises the
comparison or the diagnosis with a value of the wrong type.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from burnside import strict_json
from burnside.errors import TraceError
from burnside.trace.dtypes import FLOATS, STORAGE
from burnside.trace.limits import MAX_DIMS, MAX_ELEMENTS, MAX_STEPS, check_text, short
from burnside.trace.names import MICRO_STAGES, parse_name
from burnside.trace.statistics import Statistics

FORMAT_KEY = "burnside.format"
VERSION_KEY = "burnside.version"
#: The version of a file without aliases (every init file, every JSON trace).
FORMAT_VERSION = 1
#: The version of a safetensors trace with aliases (metadata `aliases`).
ALIAS_VERSION = 2
#: The version of a trace with statistics-only tensors (metadata `statistics`; aliases may be present too).
STATISTICS_VERSION = 3
#: The versions this burnside reads.
VERSIONS = (FORMAT_VERSION, ALIAS_VERSION, STATISTICS_VERSION)
#: Metadata key of a version-2 file: JSON object, alias name -> the name of the tensor it is bit-identical to.
ALIASES_KEY = "aliases"
#: Metadata key of a version-3 file: JSON object, statistics-only tensor name -> its `Statistics.to_json()`.
STATISTICS_KEY = "statistics"
#: The keys only a writer sets: a caller's metadata holding one is refused.
WRITER_KEYS = (FORMAT_KEY, VERSION_KEY, ALIASES_KEY, STATISTICS_KEY)
#: Keys whose safetensors value is JSON text (native JSON in the JSON form).
JSON_KEYS = frozenset({"steps", "optimizer", "params", "grads_len", "inputs", "buffers", "buffers_nonpersistent",
                       "activations", "modules", "module_settings",
                       "tied", "layer_inputs", "outputs", "loss_call", "loss_terms", "accumulate", "full_steps",
                       "constant_buffers", "generation",
                       "layer_statistics", "params_statistics"})
#: Keys a file of each kind must carry (besides the format and version). A forward trace (a trace
#: whose metadata says `kind: forward`) has no optimizer and no gradients.
REQUIRED = {
    "trace": ("framework", "framework_version", "device", "dtype", "steps", "optimizer", "params", "grads_len"),
    "forward": ("framework", "framework_version", "device", "dtype", "steps", "params", "kind"),
    "init": ("params", "inputs"),
}
#: The values of a trace's `kind`: what it records (absent: training).
TRACE_KINDS = ("training", "forward")


def trace_kind(metadata: Mapping) -> str:
    """`training` or `forward`: what a trace (already checked) records."""
    return metadata.get("kind", "training")
_NUMBERS = ("lr", "eps", "weight_decay", "momentum", "dampening", "alpha", "lr_decay", "initial_accumulator_value")
_BOOLS = ("nesterov", "amsgrad", "centered", "relative_step", "scale_parameter")
_WEIGHT_DECAY_KINDS = ("l2", "decoupled")
_STEP = re.compile(r"^step(\d+)\.")
_STEP_DIGITS = len(str(MAX_STEPS))


def decode(path: Path, raw: Mapping[str, str]) -> dict:
    """safetensors string metadata -> native values (JSON keys parsed strictly; format/version dropped)."""
    out: dict = {}
    for key, value in raw.items():
        if key in (FORMAT_KEY, VERSION_KEY):
            continue
        if key in JSON_KEYS:
            try:
                out[key] = strict_json.loads(value)
            except ValueError as exc:
                raise TraceError(f"{path}: metadata {key!r} is not valid JSON ({strict_json.describe(exc)})") from None
        else:
            out[key] = value
    return out


def encode(metadata: Mapping, kind: str) -> dict[str, str]:
    """Native metadata (already checked) -> safetensors string metadata."""
    out = {FORMAT_KEY: kind, VERSION_KEY: str(FORMAT_VERSION)}
    for key, value in metadata.items():
        out[key] = json.dumps(value, allow_nan=False) if key in JSON_KEYS else value
    return out


def check(path: Path, kind: str, metadata: Mapping, names: Iterable[str]) -> None:
    """Raise TraceError naming the key when ``metadata`` (native form) breaks docs/trace-format.md."""
    _check_required(path, kind, metadata)
    if "steps" in metadata:  # first: grads_len is checked against it
        value = metadata["steps"]
        if type(value) is not int or not 1 <= value <= MAX_STEPS:
            raise TraceError(f"{path}: metadata 'steps' must be an integer from 1 to {MAX_STEPS}, not {short(value)}")
    for key, value in metadata.items():
        check_text(path, "a metadata key", key)
        if key in WRITER_KEYS:
            raise TraceError(f"{path}: metadata {key!r} is the writer's to set, not a metadata entry")
        _check_entry(path, key, value, metadata)
    if kind == "trace":
        _check_micro_names(path, metadata.get("accumulate"), names)
    steps = _steps_named(path, names)
    if kind == "trace":
        if steps == 0:
            raise TraceError(f"{path}: no tensor is named step{{k}}.*; a trace holds at least one step")
        if steps != metadata["steps"]:
            raise TraceError(f"{path}: metadata 'steps' is {metadata['steps']} but the tensors cover {steps} "
                             f"step{'s' if steps > 1 else ''} (step0 to step{steps - 1})")


def _check_required(path: Path, kind: str, metadata: Mapping) -> None:
    """A trace's kind is one of `TRACE_KINDS`, and the keys its kind (or the init file) requires are there."""
    if kind == "trace" and "kind" in metadata:
        if metadata["kind"] not in TRACE_KINDS:
            raise TraceError(f"{path}: metadata 'kind' must be \"training\" or \"forward\", "
                             f"not {short(metadata['kind'])}")
    required = REQUIRED["forward" if kind == "trace" and metadata.get("kind") == "forward" else kind]
    missing = [key for key in required if key not in metadata]
    if missing:
        article = "an" if kind == "init" else "a"
        raise TraceError(f"{path}: metadata lacks the required key{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)}; {article} {kind} file recorded before burnside required them "
                         "must be re-recorded with the current burnside.torch or burnside-trace")


#: The metadata keys that list tensor names.
_NAME_LISTS = ("params", "inputs", "buffers", "buffers_nonpersistent", "activations", "layer_inputs", "outputs",
               "constant_buffers")


def _check_entry(path: Path, key: str, value: object, metadata: Mapping) -> None:
    """One metadata entry, by its key (``steps`` is checked before every other entry; a key burnside does not know
    holds text)."""
    if key == "steps":
        pass
    elif key in _NAME_LISTS:
        _check_names(path, key, value)
    elif key == "modules":
        _check_modules(path, value)
    elif key == "module_settings":
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise TraceError(f"{path}: metadata 'module_settings' must map module paths to objects of settings, "
                             f"not {short(value)}")
    elif key == "tied":
        _check_tied(path, value)
    elif key == "grads_len":
        _check_grads_len(path, value, metadata.get("steps"))
    elif key == "optimizer":
        _check_optimizer(path, value)
    elif key == "loss_call":
        _check_loss_call(path, value)
    elif key == "generation":
        _check_generation(path, value)
    elif key == "loss_terms":
        _check_loss_terms(path, value, metadata.get("steps"))
    elif key == "accumulate":
        _check_accumulate(path, value)
    elif key == "full_steps":
        _check_full_steps(path, value, metadata.get("steps"))
    elif key in ("layer_statistics", "params_statistics"):
        if type(value) is not bool:
            raise TraceError(f"{path}: metadata {key!r} must be true or false, not {short(value)}")
    else:
        check_text(path, f"metadata {key!r}", value)


def check_aliases(path: Path, kind: str, version: int, value: str | None, names: Iterable[str]) -> dict[str, str]:
    """The aliases of a safetensors file (its raw metadata `aliases`, None if absent), checked against the
    names of its real tensors: alias name -> target. Anything off is a corrupt file."""
    if value is None:
        return {}

    def corrupt(why: str) -> TraceError:
        return TraceError(f"{path}: corrupt trace ({why}); re-record it")

    if version < ALIAS_VERSION:
        raise corrupt(f"metadata {ALIASES_KEY!r} in a version-{version} file: aliases are version {ALIAS_VERSION}")
    if kind != "trace":
        raise corrupt(f"metadata {ALIASES_KEY!r} in an {kind} file, which has none")
    try:
        aliases = strict_json.loads(value)
    except ValueError as exc:
        raise corrupt(f"metadata {ALIASES_KEY!r} is not valid JSON: {strict_json.describe(exc)}") from None
    if not isinstance(aliases, dict) or not all(isinstance(v, str) for v in aliases.values()):
        raise corrupt(f"metadata {ALIASES_KEY!r} must map tensor names to tensor names, not {short(aliases)}")
    real = set(names)
    for alias, target in aliases.items():
        check_text(path, "an alias name", alias)
        if not alias:
            raise corrupt("an alias has an empty name")
        if alias in real:
            raise corrupt(f"alias {short(alias)} is also the name of a tensor in the file")
        if target not in real:
            what = "another alias, not a tensor" if target in aliases else "which is not in the file"
            raise corrupt(f"alias {short(alias)} points to {short(target)}, {what}")
    return aliases


def check_statistics(path: Path, kind: str, version: int, value: object, names: Iterable[str],
                     forward: bool = False) -> dict[str, Statistics]:
    """The statistics-only tensors of a file (its metadata `statistics` in native form, None if absent), checked
    against the names of its real tensors and aliases: name -> `Statistics`. Anything off is a corrupt file.
    ``forward``: the file is a forward trace (metadata `kind = forward`), whose rules differ (`statistics_refusal`)."""
    if value is None:
        return {}

    def corrupt(why: str) -> TraceError:
        return TraceError(f"{path}: corrupt trace ({why}); re-record it")

    if version < STATISTICS_VERSION:
        raise corrupt(f"metadata {STATISTICS_KEY!r} in a version-{version} file: statistics are version "
                      f"{STATISTICS_VERSION}")
    if kind != "trace":
        raise corrupt(f"metadata {STATISTICS_KEY!r} in an {kind} file, which holds every tensor in full")
    if not isinstance(value, dict):
        raise corrupt(f"metadata {STATISTICS_KEY!r} must map tensor names to statistics, not {short(value)}")
    real = set(names)
    out: dict[str, Statistics] = {}
    for name, entry in value.items():
        check_text(path, "a statistics name", name)
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if isinstance(shape, list) and len(shape) > MAX_DIMS:  # before anything multiplies its sizes
            raise corrupt(f"statistics of {short(name)}: {len(shape)} dimensions, more than the {MAX_DIMS} allowed")
        if not name:
            raise corrupt("a statistics entry has an empty name")
        if name in real:
            raise corrupt(f"statistics of {short(name)}, which the file also holds as a tensor or an alias")
        stats = Statistics.from_json(short(name), entry, str(path))
        why = statistics_refusal(name, stats.dtype, stats.shape, forward)
        if why is not None:
            raise corrupt(f"statistics of {short(name)}: {why}")
        if math.prod(max(d, 1) for d in stats.shape) > MAX_ELEMENTS:
            raise corrupt(f"statistics of {short(name)}: shape {short(list(stats.shape))} is beyond a tensor's bounds")
        if stats.norm < 0 or stats.max_abs < 0:
            raise corrupt(f"statistics of {short(name)}: norm and max_abs are magnitudes, never negative")
        if stats.nonfinite == 0 and not math.isfinite(stats.max_abs):
            raise corrupt(f"statistics of {short(name)}: max_abs {stats.max_abs} with no non-finite value")
        if stats.nonfinite and (math.isfinite(stats.max_abs)
                                or not (math.isnan(stats.mean) and math.isnan(stats.norm))):
            raise corrupt(f"statistics of {short(name)}: {stats.nonfinite} non-finite values, but mean and norm "
                          "are not \"nan\" or max_abs is finite")
        out[name] = stats
    return out


#: A captured operation's output in a port's forward trace (`step{k}.captured.{n}`, burnside-trace's graph capture).
_CAPTURED_NAME = re.compile(r"^step\d+\.captured\.\d+$")
#: The stages a forward trace may hold as statistics: its parameters (a port loads its own from the checkpoint, and
#: the load check compares hashes) and its layers (a port's taps and its captured operations).
FORWARD_STATISTICS_STAGES = ("params_before", "layer_inputs", "activations", "captured")


def statistics_refusal(name: str, dtype: str, shape: tuple[int, ...], forward: bool | None = False) -> str | None:
    """Why the tensor ``name`` may not be recorded as statistics only (None: it may): an input, a 0-d scalar, an
    integer or bool tensor; in a training trace (``forward`` False) the start's parameters (`step0.params_before.*`:
    init files and the start check need their bytes); in a forward trace (``forward`` True) anything but its
    parameters and layers (`FORWARD_STATISTICS_STAGES`: its outputs and buffers stay full). ``forward`` None (a
    writer that does not know the trace's kind yet) refuses only what neither kind allows."""
    if dtype not in STORAGE:
        return f"dtype {short(dtype)} is no dtype a trace holds"
    if dtype not in FLOATS:
        return f"an {dtype} tensor is never statistics (only float tensors are)"
    if not shape:
        return "a 0-d scalar is never statistics"
    parsed = parse_name(name)
    if parsed is not None and parsed.stage in ("inputs", "micro_inputs"):
        return "an input is never statistics (both sides start from its bytes)"
    if forward is False and parsed is not None and parsed.stage == "params_before" and parsed.step == 0:
        return "step0.params_before is never statistics in a training trace (the start: init files need its bytes)"
    if forward and (parsed is None or parsed.stage not in FORWARD_STATISTICS_STAGES) \
            and not _CAPTURED_NAME.match(name):
        stage = parsed.stage if parsed is not None else short(name)
        return (f"a forward trace holds its {stage} in full (only its parameters, layer inputs and activations may "
                "be statistics)")
    return None


def _check_full_steps(path: Path, value: object, steps: object) -> None:
    """`full_steps`: the steps recorded in full, ascending step indices (absent: every step)."""
    if (not isinstance(value, list) or not all(type(k) is int and 0 <= k < MAX_STEPS for k in value)
            or any(a >= b for a, b in zip(value, value[1:]))):
        raise TraceError(f"{path}: metadata 'full_steps' must be a list of step indices (non-negative integers, "
                         f"ascending), not {short(value)}")
    if type(steps) is int and value and value[-1] >= steps:
        raise TraceError(f"{path}: metadata 'full_steps' names step {value[-1]} of a trace of {steps} steps")


def _steps_named(path: Path, names: Iterable[str]) -> int:
    """1 + the largest k of the `step{k}.` names (0 when there are none)."""
    last = -1
    for name in names:
        m = _STEP.match(name)
        if m is None:
            continue
        digits = m.group(1)
        if len(digits) > _STEP_DIGITS or int(digits) >= MAX_STEPS:
            raise TraceError(f"{path}: tensor {short(name)} is beyond the {MAX_STEPS} steps a trace may hold")
        last = max(last, int(digits))
    return last + 1


def _check_names(path: Path, key: str, value: object) -> None:
    if not isinstance(value, list):
        raise TraceError(f"{path}: metadata {key!r} must be a list of names, not {short(value)}")
    for item in value:
        check_text(path, f"every entry of metadata {key!r}", item)
    seen: set[str] = set()
    for item in value:
        if item in seen:
            raise TraceError(f"{path}: metadata {key!r} lists {short(item)} twice")
        seen.add(item)


def _check_modules(path: Path, value: object) -> None:
    if not isinstance(value, dict):
        raise TraceError(f"{path}: metadata 'modules' must map module paths to class names, not {short(value)}")
    for module, kind in value.items():
        check_text(path, "every module path of metadata 'modules'", module)
        check_text(path, f"the class name of module {short(module)} in metadata 'modules'", kind)


def _check_tied(path: Path, value: object) -> None:
    if not isinstance(value, dict):
        raise TraceError(f"{path}: metadata 'tied' must map parameter names to the name each shares, "
                         f"not {short(value)}")
    for name, first in value.items():
        check_text(path, "every name of metadata 'tied'", name)
        check_text(path, f"the parameter {short(name)} shares in metadata 'tied'", first)


#: Micro-batches per optimizer step a trace may declare (metadata `accumulate`).
MAX_ACCUMULATE = 100_000


def _check_accumulate(path: Path, value: object) -> None:
    """`accumulate`: the micro-batches whose gradients each optimizer step sums, an integer from 2 (a loop
    that does not accumulate has no `accumulate`)."""
    if type(value) is not int or not 2 <= value <= MAX_ACCUMULATE:
        raise TraceError(f"{path}: metadata 'accumulate' must be an integer from 2 to {MAX_ACCUMULATE} (the "
                         "micro-batches of one optimizer step; a loop without accumulation has none), "
                         f"not {short(value)}")


def _check_micro_names(path: Path, accumulate: object, names: Iterable[str]) -> None:
    """Every `step{k}.micro_*.{j}` is of a trace that declares `accumulate`, with j below it."""
    for name in names:
        if ".micro_" not in name:
            continue
        parsed = parse_name(name)
        if parsed is None or parsed.stage not in MICRO_STAGES:
            continue
        j = parsed.micro
        if j is None or (parsed.stage == "micro_inputs") != bool(parsed.micro_rest):
            raise TraceError(f"{path}: tensor {short(name)} is no micro-batch tensor name (step{{k}}.micro_inputs."
                             "{j}.{name}, step{k}.micro_logits.{j}, step{k}.micro_loss.{j})")
        if type(accumulate) is not int:
            raise TraceError(f"{path}: tensor {short(name)} is a micro-batch's, but metadata 'accumulate' (the "
                             "micro-batches of one optimizer step) is absent")
        if j >= accumulate:
            raise TraceError(f"{path}: tensor {short(name)} is micro-batch {j}, beyond the {accumulate} of "
                             "metadata 'accumulate' (micro-batches count from 0)")


def _check_grads_len(path: Path, value: object, steps: object) -> None:
    if not isinstance(value, list) or not all(type(n) is int and 0 <= n < 2**63 for n in value):
        raise TraceError(f"{path}: metadata 'grads_len' must be a list of non-negative integers, "
                         f"not {short(value)}")
    if type(steps) is int and len(value) != steps:
        raise TraceError(f"{path}: metadata 'grads_len' has {len(value)} entries for {steps} steps (one per step)")


def _check_loss_call(path: Path, value: object) -> None:
    """`loss_call`: the loss function inside the loss (``fn``, a name) and its settings (strings, booleans, numbers)."""
    if not isinstance(value, dict) or not isinstance(value.get("fn"), str):
        raise TraceError(f"{path}: metadata 'loss_call' must be an object with the loss function's name as 'fn', "
                         f"not {short(value)}")
    for key, setting in value.items():
        check_text(path, "a key of metadata 'loss_call'", key)
        if isinstance(setting, str):
            check_text(path, f"metadata 'loss_call' {key!r}", setting)
        elif not isinstance(setting, (bool, int, float)):
            raise TraceError(f"{path}: metadata 'loss_call' {key!r} must be a string, a boolean or a number, "
                             f"not {short(setting)}")
        elif not isinstance(setting, bool):
            _check_number(path, f"metadata 'loss_call' {key!r}", setting)


def _check_generation(path: Path, value: object) -> None:
    """`generation`: a forward trace of a decode loop, `prompt` (its length) and `steps` (positive integers),
    `tokens` (the token chosen at each step, one more than `steps`), `greedy` (true or false)."""
    ok = (isinstance(value, dict) and type(value.get("prompt")) is int and value["prompt"] >= 1
          and type(value.get("steps")) is int and value["steps"] >= 1 and isinstance(value.get("tokens"), list)
          and len(value["tokens"]) == value["steps"] + 1 and all(type(t) is int and t >= 0 for t in value["tokens"])
          and type(value.get("greedy", True)) is bool)
    if not ok:
        raise TraceError(f"{path}: metadata 'generation' must be an object with the prompt's length, the decode "
                         f"steps and the token chosen at each step (one more than the steps), not {short(value)}")


def _check_loss_terms(path: Path, value: object, steps: object) -> None:
    """`loss_terms`: the loss functions inside a loss that is no single one of them, each an object like `loss_call`'s
    (what its input and target are, a name or null; its input's element count) with one value and one weight per
    step (numbers)."""
    if not isinstance(value, list) or not value or not all(isinstance(term, dict) for term in value):
        raise TraceError(f"{path}: metadata 'loss_terms' must be a list of objects, not {short(value)}")
    for term in value:
        per_step = {key: term.get(key) for key in ("values", "weights")}
        settings = {key: v for key, v in term.items() if key not in per_step and v is not None}
        _check_loss_call(path, settings)
        for key, numbers in per_step.items():
            if not isinstance(numbers, list) or (type(steps) is int and len(numbers) != steps) or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers):
                raise TraceError(f"{path}: metadata 'loss_terms' {key!r} must be a list of one number per step, "
                                 f"not {short(numbers)}")
            for x in numbers:
                _check_number(path, f"metadata 'loss_terms' {key!r}", x)


def _check_optimizer(path: Path, value: object) -> None:
    if not isinstance(value, dict):
        raise TraceError(f"{path}: metadata 'optimizer' must be an object such as "
                         f"{{\"name\": \"sgd\", \"lr\": 0.1}}, not {short(value)}")
    if "name" not in value:
        raise TraceError(f"{path}: metadata 'optimizer' has no \"name\"")
    groups = value.get("groups")
    if groups is not None:
        if not isinstance(groups, list) or not groups:
            raise TraceError(f"{path}: metadata optimizer.groups must be a non-empty list of objects, not "
                             f"{short(groups)}")
        for i, group in enumerate(groups):
            where = f"metadata optimizer.groups[{i}]"
            if not isinstance(group, dict) or not isinstance(group.get("params"), list):
                raise TraceError(f"{path}: {where} must be an object with a \"params\" list, not {short(group)}")
            for name in group["params"]:
                if not isinstance(name, str):
                    raise TraceError(f"{path}: {where}.params must hold parameter names, not {short(name)}")
                check_text(path, f"{where}.params", name)
            _check_settings(path, {k: v for k, v in group.items() if k != "params"}, where)
    _check_settings(path, {k: v for k, v in value.items() if k != "groups"}, "metadata optimizer")


#: An optimizer setting that is a list of numbers: how many (None: at least one), as its error names the list.
_NUMBER_LISTS = {
    "betas": (2, "a list of two numbers"),
    "ns_coefficients": (3, "a list of three numbers"),  # Muon's Newton-Schulz (a, b, c)
    "lr_per_step": (None, "a non-empty list of numbers"),
}


def _check_settings(path: Path, value: dict, prefix: str) -> None:
    for key, item in value.items():
        check_text(path, f"a key of {prefix}", key)
        where = f"{prefix}.{key}"
        if key in _NUMBERS:
            _check_number(path, where, item)
        elif key in _NUMBER_LISTS:
            count, shape = _NUMBER_LISTS[key]
            if not isinstance(item, list) or (len(item) != count if count is not None else not item):
                raise TraceError(f"{path}: {where} must be {shape}, not {short(item)}")
            for number in item:
                _check_number(path, where, number)
        elif key in _BOOLS:
            if type(item) is not bool:
                raise TraceError(f"{path}: {where} must be true or false, not {short(item)}")
        elif key == "weight_decay_kind":
            if item not in _WEIGHT_DECAY_KINDS:
                raise TraceError(f"{path}: {where} must be \"l2\" or \"decoupled\", not {short(item)}")
        elif key == "param_groups":
            if type(item) is not int or item < 1:
                raise TraceError(f"{path}: {where} must be a positive integer, not {short(item)}")
        elif key == "name":
            check_text(path, where, item)
            if not item:
                raise TraceError(f"{path}: {where} is empty")
        else:
            _check_other_setting(path, where, item)


def _check_other_setting(path: Path, where: str, item: object) -> None:
    """A setting burnside does not name: a finite number, text, true/false or null."""
    if isinstance(item, float):
        _check_number(path, where, item)
    elif not (item is None or type(item) in (bool, int) or isinstance(item, str)):
        raise TraceError(f"{path}: {where} must be a string, number, true/false or null, not {short(item)}")
    elif isinstance(item, str):
        check_text(path, where, item)


def _check_number(path: Path, where: str, value: object) -> None:
    try:
        finite = type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer beyond float range
        finite = False
    if not finite:
        raise TraceError(f"{path}: {where} must be a finite number, not {short(value)}")


__all__ = ["ALIAS_VERSION", "ALIASES_KEY", "STATISTICS_KEY", "STATISTICS_VERSION", "WRITER_KEYS", "check_statistics",
           "statistics_refusal", "FORWARD_STATISTICS_STAGES", "FORMAT_KEY", "FORMAT_VERSION", "VERSIONS",
           "check_aliases", "JSON_KEYS", "REQUIRED",
           "TRACE_KINDS", "VERSION_KEY", "check", "decode",
           "encode", "trace_kind"]

"""A user's burn port as the burn side: build it, run it from the PyTorch side's starting point.

The contract with the port's binary (rust/README.md, `burnside check --help`):

    BIN --init INIT -o OUT [--steps N | --batches N] [ARGS...]

INIT is an init file (`burnside.format = init`: `params.{path}` in PyTorch layout,
`inputs.{name}` step 0's batch, `step{k}.inputs.{name}` step k's where the batches differ),
made here from the PyTorch trace's `step0.params_before.*` and `step{k}.inputs.*`. The port loads
it with `burnside_trace::InitFile` (which transposes Linear weights into burn's layout), trains
with the same steps and optimizer, records every stage with `burnside_trace::Training` (or call by
call with `TraceRecorder`), and writes OUT; `--steps N` is the PyTorch trace's step count unless
ARGS give it. `rust/cnn` is a complete example, and `burnside new` writes one to start from.

A forward trace (`burnside.torch.record_forward`) is checked the same way, with `--batches N`: its
init file also holds the buffers the model held (`buffers.{name}`: BatchNorm's running statistics)
and what PyTorch fed each module (`step{k}.layer_inputs.{module}`, for a port that feeds one layer
PyTorch's own input); the port may load its weights its own way (burn-store from the checkpoint)
and records its forward passes with `burnside_trace::Inference`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console
from rich.text import Text

from burnside.burn.binary import RunError, run_binary
from burnside.burn.cargo import build
from burnside.errors import BurnsideError
from burnside.trace import Trace, open_trace, parse_name, write_trace
from burnside.trace.dtypes import STORAGE
from burnside.trace.stream import TraceWriter
from burnside.trace.constant_buffers import unchanged_buffers
from burnside.trace.init_batches import batch_tensors

if TYPE_CHECKING:
    from burnside.progress import StepProgress


def init_from_trace(trace: Trace, path: Path) -> Path:
    """The starting point of ``trace`` (its params_before at step 0 and the batch of every step) as an init file.

    Step 0's batch is `inputs.{name}`; when the trace feeds a different batch at some step,
    every step k >= 1 also gets `step{k}.inputs.{name}` (`InitFile::float_input_at(k, ..)`).
    A forward trace's init file also holds its buffers as loaded (`buffers.{name}`) and each
    batch's recorded module inputs (`step{k}.layer_inputs.{module}`, `Batch::layer_input`); a training trace's,
    its constant buffers (persistent, never changed by the run: `buffers.{name}`, listed as `constant_buffers`).
    The trace's metadata `full_steps` and `layer_statistics` (what it recorded as statistics only) are carried
    into the init file's, so the burn recorder records the same steps and layers as statistics. A forward trace
    whose parameters are statistics (`params_statistics`) gives an init file without `params.*` (the port loads
    the checkpoint), and says `params_statistics` too.
    """
    _refuse_statistics_start(trace)
    carried = {key: trace.metadata[key] for key in _CARRIED if key in trace.metadata}
    params = _under(trace, "step0.params_before.")
    held = [n.removeprefix("step0.params_before.") for n in trace.statistics if n.startswith("step0.params_before.")]
    if trace.kind == "forward" and held:
        params = [p for p in trace.params if p in held or p in params] or [*params, *held]
    accumulate = trace.metadata.get("accumulate")
    if type(accumulate) is int:  # one batch per micro-batch: step k's micro-batch j is batch k * M + j
        inputs = _under(trace, "step0.micro_inputs.0.")
        present = set(trace.names)
        batches = [{n: np.array(trace.array(f"step{k}.micro_inputs.{j}.{n}")) for n in inputs
                    if f"step{k}.micro_inputs.{j}.{n}" in present}
                   for k in range(trace.steps) for j in range(accumulate)]
        if not params or not inputs:
            raise BurnsideError(f"{trace.path}: has no step0.params_before.* or step0.micro_inputs.0.*, so there is no "
                                "starting point to hand to the burn port")
        tensors: dict[str, np.ndarray | str] = {f"params.{p}": f"step0.params_before.{p}" for p in params}
        tensors |= batch_tensors(batches)
        return _write_init(path, trace, tensors, {"params": params, "inputs": inputs, "kind": trace.kind,
                                                  "accumulate": accumulate, **carried})
    inputs = _under(trace, "step0.inputs.")
    if not params or not inputs:
        raise BurnsideError(f"{trace.path}: has no step0.params_before.* or step0.inputs.*, so there is no "
                            "starting point to hand to the burn port")
    # a name is the trace tensor the streamed init file copies (`_write_init`); parameters held as statistics are
    # no tensor of the file (the port loads its checkpoint)
    tensors: dict[str, np.ndarray | str] = {f"params.{p}": f"step0.params_before.{p}" for p in params
                                            if f"step0.params_before.{p}" in trace}
    present = set(trace.names)
    batches = [{n: np.array(trace.array(f"step{k}.inputs.{n}")) for n in inputs if f"step{k}.inputs.{n}" in present}
               for k in range(trace.steps)]
    tensors |= batch_tensors(batches)
    # what it was made from, so that a port recording the other kind says so (burnside_trace checks it)
    metadata: dict = {"params": params, "inputs": inputs, "kind": trace.kind, **carried}
    if trace.kind != "forward":
        # the persistent buffers the run never changed (a positional table): a port may read them (`init.buffer`)
        # or compute them inline, and loading leaves those its module has no place for unused (`constant_buffers`)
        nonpersistent = set(trace.metadata.get("buffers_nonpersistent") or ())
        recorded = [n for n in trace.names if n.split(".", 2)[1:2] == ["buffers"]]
        constants = sorted(unchanged_buffers(trace, recorded, nonpersistent))
        if constants:
            tensors |= {f"buffers.{b}": f"step0.buffers.{b}" for b in constants}
            metadata |= {"buffers": constants, "constant_buffers": constants}
    if trace.kind == "forward":
        # a buffer registered with persistent=False (a causal mask kept as a constant) is outside the state_dict,
        # so outside the checkpoint a port loads too: the port computes it (or holds it as a constant), and a load
        # of the init file would otherwise refuse it as a tensor no burn parameter takes
        constant = set(trace.metadata.get("buffers_nonpersistent") or ())
        buffers = [b for b in _under(trace, "step0.buffers.") if b not in constant]
        tensors |= {f"buffers.{b}": f"step0.buffers.{b}" for b in buffers}
        layer_inputs = [n for n in trace.names if ".layer_inputs." in n]
        tensors |= {n: n for n in layer_inputs}
        metadata |= {"buffers": buffers, "layer_inputs": _under(trace, "step0.layer_inputs.")}
    return _write_init(path, trace, tensors, metadata)


#: Init files of this many bytes or more are streamed (`_write_init`).
_STREAM_INIT = 256 * 2**20


def _write_init(path: Path, trace: Trace, tensors: dict[str, np.ndarray | str], metadata: dict) -> Path:
    """Write the init file: each tensor an array, or the name of ``trace``'s tensor to copy. A large one is
    streamed, each copied tensor read from the mapped file and its pages released once written, so the memory
    taken is the largest tensor's, not the file's (a 1.24 B-parameter model's init file, copied then encoded
    whole, went past 12 GiB); a small one is encoded whole, its header packed tight (a streamed file reserves
    64 KiB of header room)."""
    size = sum(trace.info(t).n * np.dtype(STORAGE[trace.info(t).dtype]).itemsize if isinstance(t, str)
               else np.asarray(t).nbytes for t in tensors.values())
    if size < _STREAM_INIT:
        arrays = {name: np.array(trace.array(t)) if isinstance(t, str) else t for name, t in tensors.items()}
        return write_trace(path, arrays, metadata, kind="init")
    with TraceWriter(path, kind="init", expected_tensors=len(tensors)) as writer:
        for name, tensor in tensors.items():
            if isinstance(tensor, str):
                writer.add(name, trace.array(tensor))
                trace.release(tensor)
            else:
                writer.add(name, tensor)
        return writer.finish(metadata)


#: The trace metadata an init file carries to the burn recorder: how the trace recorded statistics.
_CARRIED = ("full_steps", "layer_statistics", "params_statistics")


def _refuse_statistics_start(trace: Trace) -> None:
    """The start (step 0's parameters, every batch) is needed in full: a trace holding only statistics of one of
    them has no starting point (a reader refuses such a file; this guards a `Trace` built by other means)."""
    for name in trace.statistics:
        parsed = parse_name(name)
        if parsed is not None and (parsed.stage in ("inputs", "micro_inputs")
                                   or (parsed.stage == "params_before" and parsed.step == 0
                                       and trace.kind != "forward")):
            raise BurnsideError(f"{trace.path}: holds only the statistics of {name}, so there is no starting point "
                                "to hand to the burn port; re-record it (inputs and step0.params_before are always "
                                "recorded in full)")


def _under(trace: Trace, prefix: str) -> list[str]:
    """The rest of each of ``trace``'s names that start with ``prefix``, in the trace's order."""
    return [n.removeprefix(prefix) for n in trace.names if n.startswith(prefix)]


def record_port(torch_trace: Path, burn_crate: Path, bin_name: str, args: list[str], out_dir: Path,
                console: Console | None = None, *, out: Path | None = None,
                progress: StepProgress | None = None, features: list[str] | None = None,
                no_default_features: bool = False) -> Path:
    """Build ``bin_name`` of the crate at ``burn_crate``, run it from ``torch_trace``'s start; the burn trace.

    The init file goes to ``out_dir/init.safetensors``, the trace to ``out`` (default
    ``out_dir/{bin_name}.burn.safetensors``). ``progress`` is told the steps (batches) the port
    reports (`burnside_trace::step_done`); the build's progress goes to ``console``. ``features``
    and ``no_default_features`` are the crate's cargo features (`cargo build --features ...`).
    """
    if not (burn_crate / "Cargo.toml").is_file():
        raise BurnsideError(f"{burn_crate}: no Cargo.toml; --burn-crate takes the directory of the port's crate")
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = open_trace(torch_trace)
    init = init_from_trace(trace, out_dir / "init.safetensors")
    if not any(a.split("=", 1)[0] in ("--steps", "--batches") for a in args):
        # as many steps as PyTorch trained, or batches as it ran forward
        args = [*args, "--batches" if trace.kind == "forward" else "--steps", str(trace.steps)]
    cargo_args = ["--no-default-features"] if no_default_features else []
    if features:
        cargo_args += ["--features", ",".join(features)]
    binary = build(burn_crate, bins=[bin_name], extra=cargo_args, console=console, reuse=True).executables[bin_name]
    out = out or out_dir / f"{bin_name}.burn.safetensors"
    out.unlink(missing_ok=True)
    try:
        run_binary(binary, ["--init", str(init), "-o", str(out), *args], expect_file=out, progress=progress)
    except RunError as error:
        # a port whose forward pass crashed under capture wrote the trace of what ran before it (metadata
        # `crashed`, written whole): compared, the crash line said beside the verdict
        if not _crashed_trace(out):
            parted = _parted_shape(trace, getattr(error, "recorded_shapes", []))
            if parted:
                raise RunError(f"{error}; {parted}") from None
            raise
        if console is not None:
            console.print(Text(f"{bin_name} crashed: what ran before the crash is compared below", style="red"))
    return out


def _parted_shape(trace: Trace, shapes: list[tuple[str, tuple[int, ...]]]) -> str:
    """Of the layer outputs a port recorded at the step it panicked (``shapes``), the first whose shape is not the
    PyTorch trace's, said with the settings that decide its kind's shape and A's configured values; "" when every
    one agrees (or none was recorded)."""
    from burnside.report.table import shape_settings

    modules = trace.metadata.get("modules") if isinstance(trace.metadata.get("modules"), dict) else {}
    for name, shape in shapes:
        if name not in trace or tuple(trace.info(name).shape) == shape:
            continue
        parsed = parse_name(name)
        module = parsed.rest.split("#", 1)[0] if parsed is not None and parsed.stage == "activations" else ""
        kind = modules.get(module) if module else None
        configured = shape_settings(trace.metadata, module)
        settings = ("output_padding, stride, padding, dilation, kernel size" if "ConvTranspose" in str(kind or "")
                    else "stride, padding, dilation, kernel size, pooling, a reshape")
        return (f"before the panic the port recorded {name}{f' ({kind})' if kind else ''} of shape {list(shape)} "
                f"where PyTorch's is {list(trace.info(name).shape)}, every layer output before it of PyTorch's shape: "
                f"that layer is configured otherwise ({settings})"
                + (f"; PyTorch's {module} is built with {configured}" if configured else ""))
    return ""


def _crashed_trace(path: Path) -> bool:
    """Whether ``path`` is a whole trace a crashed port wrote (metadata `crashed`)."""
    if not path.is_file():
        return False
    try:
        return bool(open_trace(path).metadata.get("crashed"))
    except BurnsideError:
        return False

"""What `burnside run NAME` can run: models with a PyTorch side and a burn side in this repository."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from burnside.burn.a1 import BUGS as A1_BUGS
from burnside.examples.a1 import TITLE as A1_TITLE
from burnside.errors import BurnsideError
from burnside.optimizers import a1_optimizers

if TYPE_CHECKING:
    from burnside.progress import StepProgress


@dataclass(frozen=True)
class Target:
    """A model both sides can train: how to record each side for N steps of an optimizer."""

    name: str
    title: str
    optims: tuple[str, ...]
    bugs: tuple[str, ...]  # silent failures the burn side can build in, to see burnside name them
    record_torch: Callable[..., Path]  # (path, *, steps, optim, progress=None) -> path
    record_burn: Callable[..., Path]  # (path, torch_trace, *, steps, optim, bug, console, progress=None) -> path
    #: (path, *, steps, optim, progress=None) -> the float64 reference
    record_reference: Callable[..., Path] | None = None
    #: the absolute tolerance `run` uses without --tol: what the two frameworks' f32 kernels were
    #: measured to agree within on a faithful port
    atol: float = 1e-6
    #: an inference example: each side runs forward passes over N batches (`steps` counts batches), no
    #: optimizer (``optims`` is empty); its traces are forward traces (`burnside.torch.record_forward`)
    forward: bool = False
    #: how many steps (batches) `run` records without --steps
    default_steps: int = 1


def _a1_torch(path: Path, *, steps: int, optim: str, progress: StepProgress | None = None) -> Path:
    from burnside.examples.a1 import record_torch

    return record_torch(path, steps=steps, optim=optim, progress=progress)


def _a1_reference(path: Path, *, steps: int, optim: str, progress: StepProgress | None = None) -> Path:
    from burnside.examples.a1 import record_reference

    return record_reference(path, steps=steps, optim=optim, progress=progress)


def _a1_burn(path: Path, torch_trace: Path, *, steps: int, optim: str, bug: str | None,
             console: Console | None, progress: StepProgress | None = None) -> Path:
    # A1's burn side builds its own model and batch in f64 like the seed (S1, S3), rather than
    # loading the PyTorch trace's start: that the two starts are bit-identical is part of the proof.
    from burnside.burn.a1 import record_a1

    return record_a1(path, steps=steps, optim=optim, console=console, bug=bug, progress=progress)


def _example(name: str, title: str, optim: str, bugs: tuple[str, ...]) -> Target:
    """A worked example (src/burnside/examples, rust/NAME): its burn port runs as `burnside check` runs a
    user's port, from the PyTorch trace's start, so it exercises exactly what a user does."""

    def torch_side(path: Path, *, steps: int, optim: str, progress: StepProgress | None = None) -> Path:
        import importlib

        return importlib.import_module(f"burnside.examples.{name}").record_torch(path, steps=steps, progress=progress)

    def reference_side(path: Path, *, steps: int, optim: str, progress: StepProgress | None = None) -> Path:
        import importlib

        return importlib.import_module(f"burnside.examples.{name}").record_torch(path, steps=steps, reference=True,
                                                                                  progress=progress)

    def burn_side(path: Path, torch_trace: Path | None, *, steps: int, optim: str, bug: str | None,
                  console: Console | None, progress: StepProgress | None = None) -> Path:
        from burnside.burn.locate import rust_workspace
        from burnside.burn.port import record_port

        if torch_trace is None:
            raise BurnsideError(f"{name}'s burn side starts from the PyTorch trace's first step: run both "
                                f"sides (`burnside run {name}`), or `burnside check` with a PyTorch trace")
        args = ["--steps", str(steps), *(["--bug", bug] if bug else [])]
        return record_port(torch_trace, rust_workspace() / name, name, args, path.parent, console, out=path,
                           progress=progress)

    # Measured on the faithful ports over 4 steps: activations, gradients and moments agree within
    # 5.1e-6 (conv and attention reductions sum in other orders), so 1e-5; A1 stays at 1e-6.
    return Target(name, title, (optim,), bugs, torch_side, burn_side, reference_side, atol=1e-5)


def _inference_example(name: str, title: str, bugs: tuple[str, ...]) -> Target:
    """A pretrained inference example (src/burnside/examples/NAME.py, rust/NAME): the PyTorch side saves the
    model's checkpoint (``NAME.pt``, `torch.save` of its state_dict) next to its trace and records eval-mode
    forward passes; the burn port loads that checkpoint through burn-store (``--checkpoint``) and runs the
    same batches on a device without autodiff, as `burnside check` runs a user's inference port."""

    def module():
        import importlib

        return importlib.import_module(f"burnside.examples.{name}")

    def torch_side(path: Path, *, steps: int, optim: str | None = None, progress: StepProgress | None = None) -> Path:
        return module().record_torch(path, steps=steps, progress=progress)

    def reference_side(path: Path, *, steps: int, optim: str | None = None,
                       progress: StepProgress | None = None) -> Path:
        return module().record_torch(path, steps=steps, reference=True, progress=progress)

    def burn_side(path: Path, torch_trace: Path | None, *, steps: int, optim: str | None = None, bug: str | None,
                  console: Console | None, progress: StepProgress | None = None) -> Path:
        from burnside.burn.locate import rust_workspace
        from burnside.burn.port import record_port

        if torch_trace is None:
            raise BurnsideError(f"{name}'s burn side loads the checkpoint the PyTorch side saves and runs its "
                                f"batches: run both sides (`burnside run {name}`), or `burnside check` with a "
                                "PyTorch trace")
        checkpoint = Path(torch_trace).parent / module().CHECKPOINT
        if not checkpoint.is_file():
            raise BurnsideError(f"{checkpoint}: no checkpoint next to the PyTorch trace {torch_trace}; record the "
                                f"PyTorch side again (`burnside run {name} --side torch`)")
        args = ["--batches", str(steps), "--checkpoint", str(checkpoint), *(["--bug", bug] if bug else [])]
        return record_port(torch_trace, rust_workspace() / name, name, args, path.parent, console, out=path,
                           progress=progress)

    # Measured on the faithful ports over 3 batches: every activation and output within 9.6e-7 of PyTorch's
    # (the loaded tensors bit-identical), so the examples' 1e-5; the smallest fault here (LayerNorm's epsilon)
    # moves the LayerNorm output by 4e-4.
    return Target(name, title, (), bugs, torch_side, burn_side, reference_side, atol=1e-5, forward=True,
                  default_steps=3)


TARGETS: dict[str, Target] = {
    "a1": Target("a1", A1_TITLE, a1_optimizers(),
                 A1_BUGS, _a1_torch, _a1_burn, _a1_reference),
    "cnn": _example("cnn", "Conv2d, BatchNorm2d, ReLU, MaxPool2d, Linear; Adam", "adam", ("bn-eps", "bn-momentum")),
    "transformer": _example("transformer", "a transformer block: Embedding, LayerNorm, attention, GELU MLP; AdamW",
                            "adamw", ("gelu-tanh", "ln-eps")),
    "rnn": _example("rnn", "a recurrent language model: Embedding, GRU, bidirectional LSTM, Linear; Adam, gradients "
                    "clipped by their global norm", "adam", ("batch-first", "no-clip", "per-tensor-clip")),
    "attention": _example("attention", "a text encoder: Embedding, nn.MultiheadAttention (packed in_proj), LayerNorm; "
                          "AdamW with a warmup schedule", "adamw", ("dropout", "no-warmup")),
    "classifier": _inference_example("classifier", "inference: a pretrained image classifier (Conv2d, BatchNorm2d "
                                     "with running statistics, ReLU, AdaptiveAvgPool2d, Dropout, Linear) loaded from "
                                     "its .pt with burn-store",
                                     ("bn-train", "stride", "padding", "no-running-stats", "dropout-on")),
    "encoder": _inference_example("encoder", "inference: a pretrained audio-style encoder (Conv1d, BatchNorm1d, GELU, "
                                  "GRU, LayerNorm, Linear) loaded from its .pt with burn-store",
                                  ("ln-eps", "gelu-tanh", "gates", "transposed", "time-axis")),
}


def get_target(name: str) -> Target:
    """The target called ``name`` (any case), or a BurnsideError listing the known ones."""
    target = TARGETS.get(name.lower())
    if target is None:
        raise BurnsideError(f"unknown target {name!r}; known targets: {', '.join(TARGETS)}")
    return target

"""What a float64 re-run of a float32 loop keeps of the float32 run, so that it computes the float32 loop's own
arithmetic in float64 (`burnside.recording.reference` runs the loops under it).

`Float32Constants` answers the constants a loop reads from its dtype (`eps=None`, `torch.finfo(x.dtype)`) with
their float32 values and names what it pinned in the reference's metadata (`_WithPins`); `_double_loss` and
`_float64_loss_errors` widen the loss with the model and say in one line what a float32 tensor the loss holds
needs.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from burnside.errors import BurnsideError

#: `torch.finfo` itself, kept while `Float32Constants` answers for it.
_FINFO = torch.finfo
#: The float32 epsilon a float32 run's `eps=None` norms use (`torch.finfo(torch.float32).eps`, 2^-23).
F32_EPS = float(_FINFO(torch.float32).eps)
#: The dtypes a float64 re-run holds, each with the one the float32 run held in its place.
_NARROWED = {torch.float64: torch.float32, torch.complex128: torch.complex64}
#: Calls whose default tolerance is read from the dtype inside PyTorch's C++ code, out of reach of a pin:
#: a float64 re-run that makes one with its default tolerance computes with float64's (named as unpinned).
_DTYPE_TOLERANCES = {"linalg_pinv": "rtol", "linalg_matrix_rank": "rtol", "linalg_lstsq": "rcond"}
#: The float32 dtypes a model's own code may ask for, each with what the float64 re-run makes in its place.
_WIDENED = {torch.float32: torch.float64, torch.complex64: torch.complex128}


#: Where torch's and burnside's own sources are (burnside's: the package, the folder above this one's).
_TORCH, _BURNSIDE = str(Path(torch.__file__).resolve().parent), str(Path(__file__).resolve().parents[1])


def _caller() -> str | None:
    """`file.py:line` of the code that made the torch call (the first frame outside torch): the model's or the
    loss's own; None when it is burnside's (the recorder's own tensors are left as they are)."""
    frame = sys._getframe(2)
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_TORCH):
        frame = frame.f_back
    if frame is None or str(Path(frame.f_code.co_filename).resolve()).startswith(_BURNSIDE):
        return None
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"


class Float32Constants(TorchFunctionMode):
    """While entered, a float64 re-run of a float32 model takes the float32 run's dtype-dependent constants.

    A float64 copy of a model computes the float32 loop's arithmetic in float64 only if every constant the
    loop reads from its dtype keeps its float32 value. PyTorch reads three kinds:

    - a module built with ``eps=None`` (`nn.RMSNorm`, the only `torch.nn` module with that default):
      `torch.finfo(input.dtype).eps`, 1.19e-7 in float32, 2.2e-16 in float64. Pinned on the copy at
      construction: its ``eps`` is set to float32's.
    - `F.rms_norm` / `torch.rms_norm` called with ``eps=None`` in the model's own code: given float32's
      epsilon when its input is float64 (this mode sees every torch call).
    - `torch.finfo(t.dtype)` in the model's or the loss's code (a clamp, an epsilon, a mask fill with
      `finfo.min`): `torch.finfo` is replaced while entered, and answers a float64 (complex128) dtype with
      float32's (complex64's) values; every other dtype as before. The call site is recorded. A float32 run
      asking for `torch.finfo(torch.float64)` by name would be answered otherwise in the reference: the
      recorded sites say where to look. A name bound before the run (`from torch import finfo`) is not
      replaced.

    The other way round, a float32 tensor the model's own code makes (`torch.arange(half, dtype=torch.float32)`,
    `softmax(..., dtype=torch.float32)`, `t.float()` of integer timesteps, `x.to(torch.float32)` as Hugging Face's
    RMSNorm upcasts) is made in float64 (`widened`, each call site once): the float32 loop's arithmetic in float64,
    where it would otherwise mix dtypes (an error) or round the re-run to float32 there (Hugging Face's LlamaRMSNorm
    output was then the reference itself at the Llama-3.2-1B shape).

    Out of reach, and named as *unpinned* instead: the default tolerances of `torch.linalg.pinv`,
    `matrix_rank` and `lstsq`, read from the dtype in C++.
    `metadata()` gives the reference's metadata: ``pinned`` and ``unpinned``, each a ``; ``-separated list
    of what was pinned and what could not be (absent when empty). Entering replaces `torch.finfo` for the
    whole process: a float64 re-run is not to be made in a thread beside other float work.
    """

    def __init__(self, *models: object) -> None:
        super().__init__()
        self.pinned: list[str] = []
        self.unpinned: list[str] = []
        self.widened: list[str] = []
        for i, model in enumerate(m for m in models if isinstance(m, nn.Module)):
            prefix = "" if i == 0 else "loss_fn."
            for name, module in model.named_modules():
                if isinstance(module, nn.RMSNorm) and module.eps is None:
                    module.eps = F32_EPS
                    self.pinned.append(f"{prefix}{name or type(module).__name__}.eps (RMSNorm eps=None) = "
                                       f"{F32_EPS:.8g}")

    def _note(self, found: list[str], what: str) -> None:
        if what not in found:
            found.append(what)

    def _finfo(self, type: object = None) -> object:  # noqa: A002 (torch.finfo's own argument name)
        if type is None:
            return _FINFO()
        narrowed = _NARROWED.get(type)
        if narrowed is None:
            return _FINFO(type)
        caller = sys._getframe(1)
        where = f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}"
        self._note(self.pinned, f"torch.finfo({str(type).removeprefix('torch.')}) at {where} answered as "
                                f"{str(narrowed).removeprefix('torch.')}")
        return _FINFO(narrowed)

    def __enter__(self) -> Float32Constants:
        torch.finfo = self._finfo
        try:
            return super().__enter__()
        except BaseException:
            torch.finfo = _FINFO
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            torch.finfo = _FINFO

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("dtype") in _WIDENED and func not in (torch.Tensor.to, torch.Tensor.type) \
                and (where := _caller()) is not None:
            # a factory's or a reduction's dtype= (`softmax(..., dtype=torch.float32)` in HF's eager attention)
            name = getattr(func, "__name__", "a call")
            name = f"torch.{name}" if getattr(torch, name, None) is func else name
            self._note(self.widened, f"{name}(dtype={str(kwargs['dtype']).removeprefix('torch.')}) at {where}")
            kwargs = {**kwargs, "dtype": _WIDENED[kwargs["dtype"]]}
        elif func is torch.Tensor.float and (where := _caller()) is not None:
            self._note(self.widened, f".float() at {where}")
            func = torch.Tensor.double
        elif func in (torch.Tensor.to, torch.Tensor.type) and (
                kwargs.get("dtype") in _WIDENED or any(a in _WIDENED for a in args[1:] if isinstance(a, torch.dtype))) \
                and (where := _caller()) is not None:
            asked = next(a for a in (*args[1:], kwargs.get("dtype")) if isinstance(a, torch.dtype) and a in _WIDENED)
            self._note(self.widened, f".{func.__name__}({str(asked).removeprefix('torch.')}) at {where}")
            args = tuple(_WIDENED.get(a, a) if isinstance(a, torch.dtype) else a for a in args)
            if "dtype" in kwargs:
                kwargs = {**kwargs, "dtype": _WIDENED.get(kwargs["dtype"], kwargs["dtype"])}
        if func is torch.nn.functional.rms_norm or func is torch.rms_norm:
            eps = args[3] if len(args) > 3 else kwargs.get("eps")
            x = args[0] if args else kwargs.get("input")
            if eps is None and isinstance(x, torch.Tensor) and x.dtype in _NARROWED:
                if len(args) > 3:
                    args = (*args[:3], F32_EPS, *args[4:])
                else:
                    kwargs = {**kwargs, "eps": F32_EPS}
                self._note(self.pinned, f"rms_norm(eps=None) = {F32_EPS:.8g}")
        else:
            name = getattr(func, "__name__", "")
            tolerance = _DTYPE_TOLERANCES.get(name)
            if tolerance is not None and not any(kwargs.get(k) is not None for k in (tolerance, "atol", "rtol", "tol")):
                self._note(self.unpinned, f"torch.linalg.{name.removeprefix('linalg_')} (its default tolerance is "
                                          "float64's, a float32 run's is float32's)")
        return func(*args, **kwargs)

    def metadata(self) -> dict[str, str]:
        """``pinned``, ``unpinned`` and ``widened`` for the reference's metadata, each present when not empty."""
        return {k: "; ".join(v) for k, v in (("pinned", self.pinned), ("unpinned", self.unpinned),
                                              ("widened", self.widened)) if v}


class _WithPins(Mapping):
    """The reference's metadata with its `Float32Constants`' ``pinned``/``unpinned``, read when the trace is written
    (after the run: a `torch.finfo` call site is known only once the model has run)."""

    def __init__(self, base: Mapping[str, object], pins: Float32Constants) -> None:
        self.base, self.pins = base, pins

    def _now(self) -> dict[str, object]:
        return {**self.base, **self.pins.metadata()}

    def __getitem__(self, key: str) -> object:
        return self._now()[key]

    def __iter__(self):
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


def _double_loss(loss_fn: Callable) -> Callable:
    """The reference's loss: a float64 deep copy of a loss that is an `nn.Module` (its class weights, a frozen
    target network it holds), the function itself otherwise."""
    return copy.deepcopy(loss_fn).double() if isinstance(loss_fn, nn.Module) else loss_fn


@contextmanager
def _float64_loss_errors() -> Iterator[None]:
    """A float32 tensor the loss holds meeting the reference's float64 ones, said in one line with its fix."""
    try:
        yield
    except RuntimeError as exc:
        text = str(exc)
        if ("Double" in text and "Float" in text) or ("double" in text and "float" in text):
            raise BurnsideError(
                f"the float64 reference met a float32 tensor ({text.splitlines()[0]}): a loss or forward that holds "
                "modules or tensors of its own (a frozen target network, class weights, a noise schedule made at "
                "import) must give them to the reference: register a tensor the forward reads as a buffer of the "
                "model (`self.register_buffer(\"alphas\", alphas)`), make the loss an nn.Module holding them "
                "(loss_fn=TDLoss(target_net)); the reference copies both to float64 as it does the model") from None
        raise


__all__ = ["F32_EPS", "Float32Constants"]

"""A language model's greedy generation as a forward trace: the prefill and each decode step a batch.

A decode loop runs the model on the prompt once (the prefill), then on one token at a time with its key/value
cache. Its slips show only there: a position that restarts at 0 under the cache, a causal mask built for the
prompt and reused at one-token steps, a cache appended twice. `record_generate` records the loop as PyTorch runs
it: step k of the trace is the loop's step k (batch 0 the prompt, batch k the token chosen at step k - 1), with
its `input_ids` and `position_ids` as the batch's inputs, every module's output and the logits; the tokens chosen
(greedy: the argmax of each step's last logits row) are metadata `generation`. A port checked against it runs the
same steps with its own cache, fed PyTorch's tokens (teacher-forced), so a divergence is placed at a step and a
layer even after the two would have chosen other tokens.

The cache lives in the forward function: a new one when a batch's first position is 0 (the prefill), so the
float64 reference's run and the float32 one each start their own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from burnside.errors import BurnsideError

if TYPE_CHECKING:
    from burnside.progress import StepProgress

#: ``step(model, input_ids, position_ids, cache) -> (logits, cache)``: one step of a decode loop, the cache the
#: previous step returned (None at the prefill).
DecodeStep = Callable[[nn.Module, torch.Tensor, torch.Tensor, object], tuple[torch.Tensor, object]]


def hf_step(model: nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: object
            ) -> tuple[torch.Tensor, object]:
    """One step of a Hugging Face `*ForCausalLM` with its own cache (a `DynamicCache` made at the prefill)."""
    if cache is None:
        from transformers import DynamicCache

        cache = DynamicCache()
    # transformers 5 names the cache `cache` (`past_key_values` deprecated), earlier ones `past_key_values`
    named = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    out = model(input_ids=input_ids, position_ids=position_ids, use_cache=True, **{named: cache})
    return out.logits, cache


class _Decoding:
    """The forward function of a generation trace's batches: each batch one step, the cache carried between
    them and made anew at a prefill (a batch whose first position is 0)."""

    def __init__(self, step: DecodeStep) -> None:
        self.step = step
        self.cache: object = None

    def __call__(self, model: nn.Module, batch: dict) -> torch.Tensor:
        ids, positions = batch["input_ids"], batch["position_ids"]
        if int(positions.reshape(-1)[0]) == 0:
            self.cache = None
        logits, self.cache = self.step(model, ids, positions, self.cache)
        return logits


def generation_batches(model: nn.Module, prompt_ids: torch.Tensor, steps: int, step: DecodeStep
                       ) -> tuple[list[dict[str, torch.Tensor]], list[int]]:
    """The loop's batches (the prompt, then each chosen token with its position) and the tokens chosen, from a
    greedy run of ``model`` as it is."""
    if prompt_ids.dim() != 2 or prompt_ids.shape[0] != 1 or prompt_ids.dtype not in (torch.int64, torch.int32):
        raise BurnsideError(f"record_generate: prompt_ids must be integer token ids of shape [1, prompt length], not "
                            f"{prompt_ids.dtype} {list(prompt_ids.shape)}")
    if type(steps) is not int or steps < 1:
        raise BurnsideError(f"record_generate: steps must be a positive integer (decode steps after the prompt), "
                            f"not {steps!r}")
    prompt = prompt_ids.to(torch.int64)
    length = prompt.shape[1]
    batches = [{"input_ids": prompt, "position_ids": torch.arange(length).unsqueeze(0)}]
    chosen: list[int] = []
    decoding = _Decoding(step)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for k in range(steps + 1):
                logits = decoding(model, batches[k])
                if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or logits.shape[:2] != \
                        batches[k]["input_ids"].shape:
                    raise BurnsideError(f"record_generate: step {k}'s logits must be [1, tokens, vocabulary], "
                                        f"one row per input token, not {getattr(logits, 'shape', type(logits))}")
                token = int(logits[0, -1].argmax())
                chosen.append(token)
                if k < steps:
                    batches.append({"input_ids": torch.tensor([[token]]),
                                    "position_ids": torch.tensor([[length + k]])})
    finally:
        model.train(was_training)
    return batches, chosen


def record_generate_trace(model: nn.Module, prompt_ids: torch.Tensor, path: str | Path, *, steps: int,
                          step: DecodeStep | None, reference: str | Path | None, activations: bool,
                          layer_inputs: bool, metadata: dict | None, progress: StepProgress | None,
                          record_forward: Callable, statistics: bool | None = None,
                          full_steps: list[int] | None = None) -> Path:
    """`burnside.torch.record_generate`'s work, given `record_forward` to record the steps with."""
    batches, forward, meta = generation_inputs(model, prompt_ids, steps, step, metadata)
    return record_forward(model, batches, path, forward=forward, activations=activations,
                          layer_inputs=layer_inputs, metadata=meta, progress=progress, reference=reference,
                          statistics=statistics, full_steps=generation_full_steps(model, statistics, full_steps,
                                                                                  steps))


def generation_full_steps(model: nn.Module, statistics: bool | None, full_steps: list[int] | None,
                          steps: int) -> list[int] | None:
    """The steps whose layers a generation trace records in full: as given, else every step where statistics are
    on (a decode step's layers are one token's, the parameters are what is large: a slip at a decode step is then
    judged at its layer, not from statistics), else None (`record_forward`'s rule)."""
    from burnside.recording.loop import LAYER_STATISTICS_ABOVE

    if full_steps is not None or statistics is False:
        return full_steps
    large = sum(p.numel() for p in model.parameters()) >= LAYER_STATISTICS_ABOVE
    return list(range(steps + 1)) if statistics or large else None


def generation_inputs(model: nn.Module, prompt_ids: torch.Tensor, steps: int, step: DecodeStep | None,
                      metadata: Mapping[str, object] | None) -> tuple[list[dict[str, torch.Tensor]], _Decoding, dict]:
    """What a generation trace (or its reference alone) records: the loop's batches from a greedy run of
    ``model``, the forward function that replays them with a cache, and the metadata with `generation`."""
    step = step or hf_step
    batches, chosen = generation_batches(model, prompt_ids, steps, step)
    generation = {"prompt": int(prompt_ids.shape[1]), "steps": steps, "tokens": chosen, "greedy": True}
    return batches, _Decoding(step), {**(metadata or {}), "generation": generation}

"""The PyTorch side: the checkpoint (safetensors and config.json, as Hugging Face ships them) and the trace of a
greedy generation (the prompt, then one token a step), with its float64 reference."""
from __future__ import annotations

from pathlib import Path

import safetensors.torch
import torch

from burnside.torch import record_generate
from model import make_model

#: Decode steps after the prompt.
STEPS = 6

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    model = make_model()
    (here / "checkpoint").mkdir(exist_ok=True)
    # a tied head is the embedding's weight: the checkpoint holds it once, under the embedding's name
    state = {name: t.contiguous() for name, t in model.state_dict().items()
             if not (model.config.tie_word_embeddings and name == "lm_head.weight")}
    safetensors.torch.save_file(state, str(here / "checkpoint" / "model.safetensors"))
    model.config.to_json_file(here / "checkpoint" / "config.json", use_diff=False)  # the port's dimensions
    prompt = torch.tensor([[3, 17, 42, 5, 60, 11, 29, 8]], dtype=torch.long)  # your tokenizer's ids
    (here / "traces").mkdir(exist_ok=True)
    record_generate(model, prompt, here / "traces" / "torch.safetensors", steps=STEPS,
                    reference=here / "traces" / "reference.safetensors")
    print("recorded", here / "traces" / "torch.safetensors")

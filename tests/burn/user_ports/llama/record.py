"""The PyTorch side: the checkpoint (safetensors and config.json, as HF ships them) and a greedy generation trace.

``--bf16``: the checkpoint in bfloat16, as HF ships most, and the trace recorded from its float32 copy (exact: the
f32 port computes what that copy computes). ``--bf16-compute``: the same checkpoint, the trace recorded from the
bfloat16 model itself, computing in bfloat16."""
from __future__ import annotations

from pathlib import Path

import sys

import safetensors.torch
import torch

from burnside.torch import record_generate
from model import make_model

STEPS = 6

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    model = make_model(llama3_tied="--llama3-tied" in sys.argv)
    # a tied head is the embedding's weight: the checkpoint holds it once, under the embedding's name, as HF saves it
    state = {name: t for name, t in model.state_dict().items()
             if not (model.config.tie_word_embeddings and name == "lm_head.weight")}
    if "--bf16" in sys.argv or "--bf16-compute" in sys.argv:
        state = {name: t.to(torch.bfloat16) for name, t in state.items()}
    (here / "checkpoint").mkdir(exist_ok=True)
    safetensors.torch.save_file(state, str(here / "checkpoint" / "model.safetensors"))
    model.config.to_json_file(here / "checkpoint" / "config.json", use_diff=False)  # the port's dimensions
    if "--bf16" in sys.argv:
        # the f32 model holding the exact widening of the bf16 weights; not model.to(bfloat16).float(), which would
        # also round the buffers outside the checkpoint (RoPE's inv_freq) that the port computes in f32
        model.load_state_dict(state)
    elif "--bf16-compute" in sys.argv:
        model = model.to(torch.bfloat16)
    prompt = torch.tensor([[3, 17, 42, 5, 60, 11, 29, 8]], dtype=torch.long)
    (here / "traces").mkdir(exist_ok=True)
    record_generate(model, prompt, here / "traces" / "torch.safetensors", steps=STEPS,
                    reference=here / "traces" / "reference.safetensors")
    print("recorded", here / "traces" / "torch.safetensors")

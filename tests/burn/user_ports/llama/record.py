"""The PyTorch side: the checkpoint (safetensors and config.json, as HF ships them) and a greedy generation trace."""
from __future__ import annotations

from pathlib import Path

import safetensors.torch
import torch

from burnside.torch import record_generate
from model import make_model

STEPS = 6

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    model = make_model()
    (here / "checkpoint").mkdir(exist_ok=True)
    safetensors.torch.save_file(model.state_dict(), str(here / "checkpoint" / "model.safetensors"))
    model.config.to_json_file(here / "checkpoint" / "config.json", use_diff=False)  # the port's dimensions
    prompt = torch.tensor([[3, 17, 42, 5, 60, 11, 29, 8]], dtype=torch.long)
    (here / "traces").mkdir(exist_ok=True)
    record_generate(model, prompt, here / "traces" / "torch.safetensors", steps=STEPS,
                    reference=here / "traces" / "reference.safetensors")
    print("recorded", here / "traces" / "torch.safetensors")

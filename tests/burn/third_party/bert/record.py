"""The PyTorch side of the BERT port: checkpoint/ (`save_pretrained`: config.json and model.safetensors),
traces/torch.safetensors and traces/reference.safetensors.  python record.py
"""

from __future__ import annotations

from pathlib import Path

import torch

from burnside.torch import record_forward
from model import build

BATCHES, BATCH, SEQ = 2, 3, 12

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    torch.manual_seed(0)
    model = build()
    with torch.no_grad():  # "pretrained": weights of a trained model's size, norm affines away from 1 and 0
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.2, 0.2)
            elif "embeddings" in name:
                p.normal_(0.0, 0.5)
            elif name.endswith("weight"):
                p.normal_(0.0, 0.15)
            else:
                p.normal_(0.0, 0.05)
    model.eval()
    model.save_pretrained(here / "checkpoint")
    batches = []
    for _ in range(BATCHES):
        input_ids = torch.randint(1, 100, (BATCH, SEQ))
        token_type_ids = torch.zeros(BATCH, SEQ, dtype=torch.long)
        token_type_ids[:, SEQ // 2:] = 1                  # a sentence pair: the second half is segment B
        attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        attention_mask[1, SEQ - 4:] = 0                   # one row padded
        input_ids[1, SEQ - 4:] = 0
        batches.append({"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask})
    (here / "traces").mkdir(exist_ok=True)
    record_forward(model, batches, here / "traces" / "torch.safetensors",
                   reference=here / "traces" / "reference.safetensors")
    print(f"recorded {BATCHES} batches: {here / 'traces' / 'torch.safetensors'} (float64 reference beside it)")

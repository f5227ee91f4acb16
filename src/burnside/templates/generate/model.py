"""The PyTorch model the burn port reproduces: a Hugging Face Llama for causal language modelling.

A tiny one, made from a seed (no download), so the project checks in seconds. For yours, return the model as
you run it, e.g. `transformers.AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B",
torch_dtype=torch.float32)`: record.py saves its checkpoint and config.json the way Hugging Face ships them, and
the port reads its dimensions from that config.json. A large model's trace holds its parameters as statistics
(hashes, from 50 M parameters), its layers in full.
"""
from __future__ import annotations

import torch
import transformers


def make_model() -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()

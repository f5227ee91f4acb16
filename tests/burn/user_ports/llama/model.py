"""The pretrained PyTorch model the burn port reproduces: a tiny Hugging Face Llama."""
from __future__ import annotations

import torch
import transformers


def make_model() -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rope_theta=500000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    model.eval()
    return model

"""The pretrained PyTorch model the burn port reproduces: a tiny Hugging Face Llama."""
from __future__ import annotations

import torch
import transformers


def make_model(llama3_tied: bool = False) -> transformers.LlamaForCausalLM:
    """``llama3_tied``: Llama 3.2's kind of config in small, llama3's RoPE scaling (its original context 1024, so
    the two lowest of the head's four frequencies are scaled by 1/8) and the head tied to the embedding."""
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 1024} if llama3_tied else None
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192 if llama3_tied else 64,
        rope_theta=500000.0, rms_norm_eps=1e-6, tie_word_embeddings=llama3_tied, rope_scaling=scaling,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    model.eval()
    return model

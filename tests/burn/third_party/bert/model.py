"""The PyTorch model the crate ports: Hugging Face's own `BertModel` (transformers, as installed), a small
configuration of it. Nothing here is written for the port.
"""

from __future__ import annotations

from transformers import BertConfig, BertModel


def build() -> BertModel:
    return BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
                                layer_norm_eps=1e-12))

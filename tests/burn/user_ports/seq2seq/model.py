"""A small seq2seq Transformer (post-norm, one encoder and one decoder layer) that the burn port
in src/main.rs reproduces."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 20          # id 0 = padding
PAD, BOS = 0, 1
D_MODEL = 32
N_HEADS = 2
D_FF = 64
MAX_LEN = 16


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """The tutorial's positional table, [1, max_len, d_model]."""
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(1, max_len, d_model)
    pe[0, :, 0::2] = torch.sin(position * div_term)
    pe[0, :, 1::2] = torch.cos(position * div_term)
    return pe


class Seq2Seq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.register_buffer("pe", sinusoidal_table(MAX_LEN, D_MODEL))  # persistent
        enc_layer = nn.TransformerEncoderLayer(D_MODEL, N_HEADS, D_FF, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc_layer, num_layers=1, enable_nested_tensor=False)
        dec_layer = nn.TransformerDecoderLayer(D_MODEL, N_HEADS, D_FF, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoder(dec_layer, num_layers=1)
        self.head = nn.Linear(D_MODEL, VOCAB)
        self.head.weight = self.embed.weight          # tied

    def embed_pos(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids) * math.sqrt(D_MODEL) + self.pe[:, : ids.size(1)]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        src_pad = src == PAD
        tgt_pad = tgt_in == PAD
        x = self.embed_pos(src)
        causal = nn.Transformer.generate_square_subsequent_mask(
            tgt_in.size(1), device=src.device, dtype=x.dtype)
        memory = self.encoder(x, src_key_padding_mask=src_pad)
        out = self.decoder(self.embed_pos(tgt_in), memory, tgt_mask=causal,
                           tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        return self.head(out)


def shift_right(tgt: torch.Tensor) -> torch.Tensor:
    """Teacher forcing: the decoder reads BOS followed by the target without its last token."""
    bos = torch.full((tgt.size(0), 1), BOS, dtype=tgt.dtype, device=tgt.device)
    return torch.cat([bos, tgt[:, :-1]], dim=1)


def seq2seq_forward(model: nn.Module, batch: dict) -> torch.Tensor:
    return model(batch["src"], shift_right(batch["tgt"]))


def seq2seq_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1),
                           label_smoothing=0.1, ignore_index=PAD)

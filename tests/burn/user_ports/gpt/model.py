"""A tiny GPT: token+position embeddings, 2 pre-norm blocks (RMSNorm, causal self-attention, SwiGLU), tied head."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, D, HEADS, T, LAYERS, HIDDEN = 16, 16, 2, 8, 2, 32


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(D, 3 * D, bias=False)
        self.c_proj = nn.Linear(D, D, bias=False)
        mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        self.register_buffer("bias", mask, persistent=False)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(D, dim=2)
        hs = c // HEADS
        q = q.view(b, t, HEADS, hs).transpose(1, 2)
        k = k.view(b, t, HEADS, hs).transpose(1, 2)
        v = v.view(b, t, HEADS, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class SwiGLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(D, HIDDEN, bias=False)
        self.w3 = nn.Linear(D, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, D, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.RMSNorm(D, eps=None)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.RMSNorm(D, eps=None)
        self.mlp = SwiGLU()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(T, D)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.RMSNorm(D, eps=None)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.apply(self._init_weights)  # GPT-2's initialisation

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return self.lm_head(x).view(b * t, VOCAB)  # flat logits: cross_entropy against flat targets

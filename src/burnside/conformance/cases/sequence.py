"""Sequence layers: the recurrent layers (LSTM, bidirectional LSTM, GRU, RNN), multi-head attention, the
transformer encoder and decoder, and the position encodings (rotary, sinusoidal).

PyTorch's recurrent layers are sequence-first by default (``[seq, batch, features]``) and burn's batch-first
(``Gru`` is batch-first only); the ``*/default`` cases build both sides with defaults so the layout default
shows up, the other cases set the layout on both sides. burn's ``MultiHeadAttention`` and transformer encoder
default to dropout 0.1 (PyTorch's ``nn.MultiheadAttention`` to 0.0) and the encoder's feed-forward to GELU
(PyTorch's to ReLU). PyTorch has no rotary or sinusoidal position encoding module: the cases write the usual
formulations as small modules (``RotateHalfRope``, ``InterleavedRope``, ``SinusoidalEncoding``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from burnside.conformance.case import Case, Hypothesis


# --- the PyTorch formulations PyTorch has no module for -------------------------------------------------------

def _rope_angles(seq: int, d: int, theta: float, like: torch.Tensor) -> torch.Tensor:
    """``pos * theta^(-2i/d)`` for i in [0, d/2), ``[seq, d/2]`` in ``like``'s dtype."""
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=like.dtype) / d)
    return torch.arange(seq, dtype=like.dtype)[:, None] * inv[None, :]


class RotateHalfRope(nn.Module):
    """Rotary position embedding as GPT-NeoX and Hugging Face's LLaMA write it: dimension i is rotated with
    dimension i + d/2 (``x * cos + rotate_half(x) * sin``); input ``[..., seq, d]``."""

    def __init__(self, d: int, theta: float = 10000.0) -> None:
        super().__init__()
        self.d, self.theta = d, theta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        angles = _rope_angles(x.shape[-2], self.d, self.theta, x)
        cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
        half = self.d // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin


class InterleavedRope(nn.Module):
    """Rotary position embedding as the RoFormer paper and Meta's LLaMA (complex multiplication) write it:
    the pairs (x[2i], x[2i+1]) are rotated by pos * theta_i; input ``[..., seq, d]``."""

    def __init__(self, d: int, theta: float = 10000.0) -> None:
        super().__init__()
        self.d, self.theta = d, theta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        angles = _rope_angles(x.shape[-2], self.d, self.theta, x)
        cos, sin = angles.cos(), angles.sin()
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)


class SinusoidalEncoding(nn.Module):
    """The transformer's sinusoidal position encoding added to ``x`` ``[batch, seq, d]`` (Vaswani et al.,
    PyTorch's tutorial): ``pe[pos, 2i] = sin(pos / timescale^(2i/d))``, ``pe[pos, 2i+1] = cos(...)``."""

    def __init__(self, d: int, max_timescale: float = 10000.0) -> None:
        super().__init__()
        self.d, self.max_timescale = d, max_timescale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = x.shape[1]
        position = torch.arange(seq, dtype=x.dtype)[:, None]
        div = torch.exp(torch.arange(0, self.d, 2, dtype=x.dtype) * (-math.log(self.max_timescale) / self.d))
        pe = torch.zeros(seq, self.d, dtype=x.dtype)
        pe[:, 0::2] = torch.sin(position * div)
        pe[:, 1::2] = torch.cos(position * div)
        return x + pe


# --- what burn computes, where a hypothesis needs a module ------------------------------------------------------

class ResetBeforeGru(nn.Module):
    """A one-layer batch-first GRU on ``nn.GRU``'s own parameters that applies the reset gate before the hidden
    transform, ``n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)`` (Cho et al. 2014, burn's
    ``GruConfig::with_reset_after(false)``), where ``nn.GRU`` computes ``tanh(W_in x + b_in + r * (W_hn h + b_hn))``."""

    def __init__(self, gru: nn.GRU) -> None:
        super().__init__()
        for name, p in gru.named_parameters():
            setattr(self, name, p)
        self.hidden = gru.hidden_size
        self.has_bias = gru.bias

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w_ih, w_hh = self.weight_ih_l0.chunk(3), self.weight_hh_l0.chunk(3)
        zero = x.new_zeros(3 * self.hidden)
        b_ih = (self.bias_ih_l0 if self.has_bias else zero).chunk(3)
        b_hh = (self.bias_hh_l0 if self.has_bias else zero).chunk(3)
        h = x.new_zeros(x.shape[0], self.hidden)
        out = []
        for t in range(x.shape[1]):
            xt = x[:, t]
            r = torch.sigmoid(xt @ w_ih[0].T + b_ih[0] + h @ w_hh[0].T + b_hh[0])
            z = torch.sigmoid(xt @ w_ih[1].T + b_ih[1] + h @ w_hh[1].T + b_hh[1])
            n = torch.tanh(xt @ w_ih[2].T + b_ih[2] + (r * h) @ w_hh[2].T + b_hh[2])
            h = (1 - z) * n + z * h
            out.append(h)
        return torch.stack(out, 1), h[None]


class MaskFilledAttention(nn.Module):
    """``nn.MultiheadAttention`` (batch-first, self-attention, no dropout) on its own parameters, with masked
    scores replaced by ``min_float`` (burn's ``mask_fill(mask, -1e4)``) rather than set to -inf: a query whose
    every key is masked attends to all of them uniformly (PyTorch's gives it zero weights, or NaN weights with
    ``need_weights=True``)."""

    def __init__(self, mha: nn.MultiheadAttention, min_float: float = -1.0e4) -> None:
        super().__init__()
        self.in_proj_weight, self.in_proj_bias, self.out_proj = mha.in_proj_weight, mha.in_proj_bias, mha.out_proj
        self.heads, self.min_float = mha.num_heads, min_float

    def forward(self, q, k, v, key_padding_mask=None, attn_mask=None, need_weights=False):
        b, s, d = q.shape
        qkv = F.linear(q, self.in_proj_weight, self.in_proj_bias).view(b, s, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], self.min_float)
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, self.min_float)
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        return self.out_proj(context), None


class _SwappedPreNorms(nn.TransformerEncoderLayer):
    """A pre-norm layer with ``norm2`` before the attention and ``norm1`` before the feed-forward."""

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src + self._sa_block(self.norm2(src), src_mask, src_key_padding_mask, is_causal=is_causal)
        return x + self._ff_block(self.norm1(x))


def _swap_pre_norms(layer: nn.TransformerEncoderLayer) -> nn.Module:
    """The pre-norm layer with ``norm2`` before the attention and ``norm1`` before the feed-forward (burn's
    ``norm_first`` order: ``norm_2`` then ``norm_1``)."""
    layer.__class__ = _SwappedPreNorms
    return layer


class _RotatedDecoderPreNorms(nn.TransformerDecoderLayer):
    """A pre-norm decoder layer with ``norm3`` before the self-attention, ``norm1`` before the cross-attention and
    ``norm2`` before the feed-forward."""

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt + self._sa_block(self.norm3(tgt), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        x = x + self._mha_block(self.norm1(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
        return x + self._ff_block(self.norm2(x))


def _rotate_decoder_pre_norms(decoder: nn.TransformerDecoder) -> nn.Module:
    """burn's ``norm_first`` decoder order: ``norm_3``, ``norm_1``, ``norm_2``."""
    for layer in decoder.layers:
        layer.__class__ = _RotatedDecoderPreNorms
    return decoder


def _set(layer: nn.Module, **attributes) -> nn.Module:
    for name, value in attributes.items():
        setattr(layer, name, value)
    return layer


# --- the cases ---------------------------------------------------------------------------------------------------

def _out(layer, x, batch):
    """A recurrent layer's output sequence (``(output, state)[0]``)."""
    return layer(x)[0]


def _self_attn(layer, x, batch):
    return layer(x, x, x, need_weights=False)[0]


def _padded(layer, x, batch):
    return layer(x, x, x, key_padding_mask=batch["pad"].bool(), need_weights=False)[0]


def _causal(layer, x, batch):
    return layer(x, x, x, attn_mask=batch["causal"].bool(), need_weights=False)[0]


def _with_state(layer, x, batch):
    """A recurrent layer started from the batch's initial state (``(h0, c0)`` for an LSTM, ``h0`` else)."""
    state = (batch["h0"], batch["c0"]) if isinstance(layer, nn.LSTM) else batch["h0"]
    return layer(x, state)[0]


def _states(*names: str, shape: tuple[int, ...] = (1, 2, 5)):
    return lambda g: {name: torch.randn(shape, generator=g) for name in names}


def _memory(shape: tuple[int, ...] = (2, 3, 8)):
    return lambda g: {"memory": torch.randn(shape, generator=g)}


def _cross_attn(layer, x, batch):
    return layer(x, batch["memory"], batch["memory"], need_weights=False)[0]


def _decode(layer, x, batch):
    return layer(x, batch["memory"])


def _decode_causal(layer, x, batch):
    return layer(x, batch["memory"], tgt_mask=batch["causal"].bool())


def _tdl(**kw) -> nn.TransformerDecoder:
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, **kw)
    return nn.TransformerDecoder(layer, 1)


def _pad(rows: list[list[int]]):
    """A key padding mask (1: padding, ignored) given as integers, as a port reads it."""
    return lambda g: {"pad": torch.tensor(rows)}


def _causal_mask(seq: int):
    return lambda g: {"causal": torch.triu(torch.ones(seq, seq, dtype=torch.int64), 1)}


def _batch_first_default(fix: str) -> Hypothesis:
    """burn's recurrent layers read batch-first by default, PyTorch's sequence-first."""
    return Hypothesis("default", "burn's recurrent layers are batch-first by default (PyTorch's: sequence-first): "
                      "[seq, batch, features] is read as [batch, seq, features]",
                      lambda layer: _set(layer, batch_first=True), fix)


def _tel(**kw) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, **kw)


CASES = [
    # LSTM: burn's Lstm is batch-first by default, PyTorch's sequence-first.
    Case("lstm/default", "nn.LSTM(4, 5), defaults (sequence-first)", lambda: nn.LSTM(4, 5), (3, 2, 4), call=_out,
         hypotheses=(_batch_first_default("LstmConfig::new(d_input, d_hidden, true).with_batch_first(false)"),)),
    Case("lstm/seq-first", "nn.LSTM(4, 5) against LstmConfig with_batch_first(false)", lambda: nn.LSTM(4, 5),
         (3, 2, 4), call=_out),
    Case("lstm/batch-first", "nn.LSTM(4, 5, batch_first=True)", lambda: nn.LSTM(4, 5, batch_first=True), (2, 3, 4),
         call=_out, ci=True),
    Case("lstm/no-bias", "nn.LSTM(4, 5, bias=False, batch_first=True)",
         lambda: nn.LSTM(4, 5, bias=False, batch_first=True), (2, 3, 4), call=_out),
    Case("lstm/initial-state", "nn.LSTM(4, 5, batch_first=True) from (h0, c0) (burn: LstmState::new(cell, hidden))",
         lambda: nn.LSTM(4, 5, batch_first=True), (2, 3, 4), call=_with_state, batch=_states("h0", "c0")),
    Case("lstm/two-layers", "nn.LSTM(4, 5, num_layers=2, batch_first=True) against two Lstm, the second fed the first",
         lambda: nn.LSTM(4, 5, num_layers=2, batch_first=True), (2, 3, 4), call=_out),
    Case("lstm/proj-size", "nn.LSTM(4, 5, proj_size=3)", lambda: nn.LSTM(4, 5, proj_size=3), (3, 2, 4), call=_out,
         not_comparable="burn's Lstm has no proj_size (the hidden state projected to a smaller size)"),
    # Bidirectional LSTM.
    Case("bilstm/default", "nn.LSTM(4, 5, bidirectional=True), defaults (sequence-first)",
         lambda: nn.LSTM(4, 5, bidirectional=True), (3, 2, 4), call=_out,
         hypotheses=(_batch_first_default("BiLstmConfig::new(d_input, d_hidden, true).with_batch_first(false)"),)),
    Case("bilstm/batch-first", "nn.LSTM(4, 5, bidirectional=True, batch_first=True)",
         lambda: nn.LSTM(4, 5, bidirectional=True, batch_first=True), (2, 3, 4), call=_out),
    Case("bilstm/initial-state", "nn.LSTM(4, 5, bidirectional=True, batch_first=True) from (h0, c0), "
         "[directions, batch, hidden]", lambda: nn.LSTM(4, 5, bidirectional=True, batch_first=True), (2, 3, 4),
         call=_with_state, batch=_states("h0", "c0", shape=(2, 2, 5))),
    # GRU: PyTorch's is reset-after (burn's default reset_after = true); burn's Gru reads batch-first only.
    Case("gru/default", "nn.GRU(4, 5), defaults (sequence-first)", lambda: nn.GRU(4, 5), (3, 2, 4), call=_out,
         hypotheses=(Hypothesis("framework", "burn's Gru has no batch_first option: it reads [batch, seq, "
                                "features] only, so PyTorch's sequence-first [seq, batch, features] is read as "
                                "batch-first",
                                lambda layer: _set(layer, batch_first=True),
                                "x.swap_dims(0, 1) before Gru::forward and after it"),)),
    Case("gru/batch-first", "nn.GRU(4, 5, batch_first=True)", lambda: nn.GRU(4, 5, batch_first=True), (2, 3, 4),
         call=_out),
    Case("gru/no-bias", "nn.GRU(4, 5, bias=False, batch_first=True)",
         lambda: nn.GRU(4, 5, bias=False, batch_first=True), (2, 3, 4), call=_out),
    Case("gru/initial-state", "nn.GRU(4, 5, batch_first=True) from h0", lambda: nn.GRU(4, 5, batch_first=True),
         (2, 3, 4), call=_with_state, batch=_states("h0")),
    Case("gru/reset-before", "nn.GRU(4, 5, batch_first=True) against GruConfig with_reset_after(false)",
         lambda: nn.GRU(4, 5, batch_first=True), (2, 3, 4), call=_out,
         hypotheses=(Hypothesis("framework", "burn's reset_after(false) is the reset-before GRU, "
                                "tanh(W_in x + b_in + W_hn (r * h) + b_hn); nn.GRU has only reset-after, "
                                "r * (W_hn h + b_hn)", ResetBeforeGru, "GruConfig's default reset_after(true)"),)),
    Case("bigru/batch-first", "nn.GRU(4, 5, bidirectional=True, batch_first=True)",
         lambda: nn.GRU(4, 5, bidirectional=True, batch_first=True), (2, 3, 4), call=_out),
    # Elman RNN.
    Case("rnn/default", "nn.RNN(4, 5), defaults (sequence-first, tanh)", lambda: nn.RNN(4, 5), (3, 2, 4), call=_out,
         hypotheses=(_batch_first_default("RnnConfig::new(d_input, d_hidden, true).with_batch_first(false)"),)),
    Case("rnn/batch-first", "nn.RNN(4, 5, batch_first=True)", lambda: nn.RNN(4, 5, batch_first=True), (2, 3, 4),
         call=_out),
    Case("rnn/relu-no-bias", "nn.RNN(4, 5, nonlinearity='relu', bias=False, batch_first=True)",
         lambda: nn.RNN(4, 5, nonlinearity="relu", bias=False, batch_first=True), (2, 3, 4), call=_out),
    Case("birnn/batch-first", "nn.RNN(4, 5, bidirectional=True, batch_first=True)",
         lambda: nn.RNN(4, 5, bidirectional=True, batch_first=True), (2, 3, 4), call=_out),
    # Multi-head attention (burn's is batch-first only). The defaults case stays a difference: burn's dropout 0.1
    # on the attention weights draws a random mask no float64 run models, and D013 measures no dropout held
    # inside a layer in a training trace (the output is the masked weights times the values, not a masked copy).
    Case("multihead_attention/default", "nn.MultiheadAttention(8, 2, batch_first=True), self-attention, defaults",
         lambda: nn.MultiheadAttention(8, 2, batch_first=True), (2, 5, 8), call=_self_attn,
         hypotheses=(Hypothesis("default", "burn's MultiHeadAttentionConfig dropout defaults to 0.1 "
                                "(nn.MultiheadAttention's: 0.0): burn's attention weights are dropped at random",
                                fix="MultiHeadAttentionConfig::new(d_model, n_heads).with_dropout(0.0)",
                                random=True),)),
    Case("multihead_attention/no-dropout", "nn.MultiheadAttention(8, 2, batch_first=True) against with_dropout(0.0)",
         lambda: nn.MultiheadAttention(8, 2, batch_first=True), (2, 5, 8), call=_self_attn, ci=True),
    Case("multihead_attention/no-bias", "nn.MultiheadAttention(8, 2, bias=False, batch_first=True)",
         lambda: nn.MultiheadAttention(8, 2, bias=False, batch_first=True), (2, 5, 8), call=_self_attn),
    Case("multihead_attention/key-padding-mask", "nn.MultiheadAttention(8, 2, batch_first=True), key_padding_mask "
         "masking the last keys (every query keeps some)", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
         (2, 5, 8), call=_padded, batch=_pad([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]])),
    Case("multihead_attention/causal-mask", "nn.MultiheadAttention(8, 2, batch_first=True), causal attn_mask",
         lambda: nn.MultiheadAttention(8, 2, batch_first=True), (2, 5, 8), call=_causal, batch=_causal_mask(5)),
    Case("multihead_attention/square-subsequent-mask", "nn.MultiheadAttention(8, 2, batch_first=True) with "
         "nn.Transformer.generate_square_subsequent_mask(5) (float, -inf above the diagonal) against burn's "
         "generate_autoregressive_mask", lambda: nn.MultiheadAttention(8, 2, batch_first=True), (2, 5, 8),
         call=lambda layer, x, batch: layer(x, x, x, attn_mask=nn.Transformer.generate_square_subsequent_mask(
             x.shape[1], dtype=x.dtype), need_weights=False)[0]),
    Case("multihead_attention/all-keys-masked", "nn.MultiheadAttention(8, 2, batch_first=True), key_padding_mask "
         "masking every key of the second sequence", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
         (2, 5, 8), call=_padded, batch=_pad([[0, 0, 0, 1, 1], [1, 1, 1, 1, 1]]),
         hypotheses=(Hypothesis("framework", "burn fills masked scores with min_float -1e4 (PyTorch: -inf): a query "
                                "whose every key is masked attends uniformly to them, where PyTorch's attention "
                                "(scaled_dot_product_attention, need_weights=False) gives it zero weights, its "
                                "output out_proj's bias (NaN with need_weights=True)",
                                MaskFilledAttention),)),
    Case("multihead_attention/cross", "nn.MultiheadAttention(8, 2, batch_first=True), query x, key and value "
         "another sequence (3 steps)", lambda: nn.MultiheadAttention(8, 2, batch_first=True), (2, 5, 8),
         call=_cross_attn, batch=_memory()),
    Case("multihead_attention/kdim", "nn.MultiheadAttention(8, 2, kdim=6, vdim=6, batch_first=True)",
         lambda: nn.MultiheadAttention(8, 2, kdim=6, vdim=6, batch_first=True), (2, 5, 8), call=_self_attn,
         not_comparable="burn's MultiHeadAttention projects query, key and value from one d_model: no kdim/vdim"),
    Case("multihead_attention/add-bias-kv", "nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)",
         lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True), (2, 5, 8), call=_self_attn,
         not_comparable="burn's MultiHeadAttention has no add_bias_kv or add_zero_attn"),
    # Transformer encoder (PyTorch: post-norm, ReLU, eps 1e-5; burn: GELU, dropout 0.1). The defaults case stays
    # a difference for the same reason as multihead_attention/default (its GELU is measured by the next case).
    Case("transformer_encoder_layer/default", "nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), defaults "
         "(recorded with dropout off), against TransformerEncoderConfig::new(8, 16, 2, 1) defaults", lambda: _tel(),
         (2, 4, 8),
         hypotheses=(Hypothesis("default", "burn's TransformerEncoderConfig dropout defaults to 0.1, applied at "
                                "random in training (PyTorch's recorded with dropout off; its activation default "
                                "differs too: transformer_encoder_layer/activation)",
                                fix="TransformerEncoderConfig::new(..).with_dropout(0.0)", random=True),)),
    Case("transformer_encoder_layer/activation", "nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True) "
         "against with_dropout(0.0), activation left at its default", lambda: _tel(dropout=0.0), (2, 4, 8),
         hypotheses=(Hypothesis("default", "burn's TransformerEncoderConfig activation defaults to GELU "
                                "(nn.TransformerEncoderLayer's: ReLU)", lambda layer: _set(layer, activation=F.gelu),
                                "TransformerEncoderConfig::new(..).with_activation(ActivationConfig::Relu)"),)),
    Case("transformer_encoder_layer/post-norm", "nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), "
         "ReLU on both", lambda: _tel(dropout=0.0), (2, 4, 8), ci=True),
    Case("transformer_encoder_layer/norm-first", "nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True, "
         "batch_first=True)", lambda: _tel(dropout=0.0, norm_first=True), (2, 4, 8),
         hypotheses=(Hypothesis("framework", "burn's TransformerEncoderLayer with norm_first normalizes the "
                                "attention's input with norm_2 and the feed-forward's with norm_1 (PyTorch: norm1, "
                                "then norm2), so PyTorch's norm1/norm2 loaded by name into norm_1/norm_2 are swapped",
                                _swap_pre_norms, "load norm1 into norm_2 and norm2 into norm_1 when norm_first"),)),
    Case("transformer_encoder_layer/eps-gelu", "nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation='gelu', "
         "layer_norm_eps=1e-3, batch_first=True)", lambda: _tel(dropout=0.0, activation="gelu", layer_norm_eps=1e-3),
         (2, 4, 8)),
    Case("transformer_encoder_layer/key-padding-mask", "nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, "
         "batch_first=True) with src_key_padding_mask", lambda: _tel(dropout=0.0), (2, 4, 8),
         call=lambda layer, x, batch: layer(x, src_key_padding_mask=batch["pad"].bool()),
         batch=_pad([[0, 0, 0, 1], [0, 0, 1, 1]])),
    Case("transformer_encoder/two-layers", "nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, "
         "batch_first=True), 2)", lambda: nn.TransformerEncoder(_tel(dropout=0.0), 2, enable_nested_tensor=False),
         (2, 4, 8)),
    # Transformer decoder (one layer in nn.TransformerDecoder: burn's TransformerDecoderLayer gives no output tensor).
    Case("transformer_decoder/post-norm", "nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, "
         "batch_first=True), 1), ReLU on both", _tdl, (2, 4, 8), call=_decode, batch=_memory()),
    Case("transformer_decoder/causal", "the post-norm decoder layer with a causal tgt_mask", _tdl, (2, 4, 8),
         call=_decode_causal, batch=lambda g: {**_memory()(g), **_causal_mask(4)(g)}),
    Case("transformer_decoder/norm-first", "nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, norm_first=True, "
         "batch_first=True) in nn.TransformerDecoder(.., 1)", lambda: _tdl(norm_first=True), (2, 4, 8), call=_decode,
         batch=_memory(),
         hypotheses=(Hypothesis("framework", "burn's TransformerDecoderLayer with norm_first normalizes the "
                                "self-attention's input with norm_3, the cross-attention's with norm_1 and the "
                                "feed-forward's with norm_2 (PyTorch: norm1, norm2, norm3), so PyTorch's norms "
                                "loaded by name are rotated", _rotate_decoder_pre_norms,
                                "load norm1 into norm_3, norm2 into norm_1 and norm3 into norm_2 when norm_first"),)),
    # Rotary position embedding: burn's RotaryEncoding rotates interleaved pairs.
    Case("rotary_encoding/interleaved", "RoPE on interleaved pairs (x[2i], x[2i+1]) against RotaryEncoding",
         lambda: InterleavedRope(8), (2, 2, 6, 8)),
    Case("rotary_encoding/rotate-half", "RoPE with rotate_half (x[i] with x[i + d/2]) against RotaryEncoding",
         lambda: RotateHalfRope(8), (2, 2, 6, 8),
         hypotheses=(Hypothesis("framework", "burn's RotaryEncoding rotates interleaved pairs (x[2i], x[2i+1]) by "
                                "pos * theta_i, not x[i] with x[i + d/2] (rotate_half, as GPT-NeoX and Hugging Face's "
                                "LLaMA do)", lambda layer: InterleavedRope(layer.d, layer.theta),
                                "permute q/k's features to interleaved order before RotaryEncoding (or rotate_half "
                                "by hand)"),)),
    Case("rotary_encoding/theta", "RoPE on interleaved pairs, theta 500, against with_theta(500.0)",
         lambda: InterleavedRope(8, 500.0), (2, 6, 8)),
    Case("rotary_encoding/long", "RoPE on interleaved pairs over 1024 positions (angles up to 1023 rad) against "
         "RotaryEncoding", lambda: InterleavedRope(4), (1, 1024, 4)),
    # Sinusoidal position encoding.
    Case("positional_encoding/default", "the sinusoidal encoding (timescale 10000) against PositionalEncodingConfig "
         "defaults", lambda: SinusoidalEncoding(8), (2, 6, 8)),
    Case("positional_encoding/long", "the sinusoidal encoding over 1024 positions against PositionalEncodingConfig "
         "defaults", lambda: SinusoidalEncoding(4), (1, 1024, 4)),
    Case("positional_encoding/timescale", "the sinusoidal encoding, timescale 100, against with_max_timescale(100)",
         lambda: SinusoidalEncoding(8, 100.0), (2, 6, 8)),
]

//! Sequence layers: the recurrent layers, multi-head attention, the transformer encoder and the
//! position encodings (rotary, sinusoidal). burnside.conformance.cases.sequence has the PyTorch side.
//!
//! burnside-trace names `Lstm`/`Gru`/`BiLstm`/`BiGru` gates and `MultiHeadAttention`'s projections
//! as PyTorch packs them; `Rnn`'s single gate and the transformer's fields (`mha`, `pwff`,
//! `norm_1`) are named here, with the renames a port of `nn.RNN` / `nn.TransformerEncoderLayer`
//! writes.

use burn::nn::activation::ActivationConfig;
use burn::nn::attention::{MhaInput, MultiHeadAttentionConfig, generate_autoregressive_mask};
use burn::nn::transformer::{
    TransformerDecoderConfig, TransformerDecoderInput, TransformerEncoderConfig,
    TransformerEncoderInput, TransformerEncoderLayer,
};
use burn::nn::{
    BiGruConfig, BiLstmConfig, BiRnnConfig, GruConfig, Lstm, LstmConfig, LstmState, PositionalEncodingConfig,
    RnnConfig, RotaryEncodingConfig,
};
use burn::module::{Module, ModuleDisplay};
use burn::tensor::{Bool, Tensor};
use burnside_trace::{OptimizerSpec, Step, TorchNames, Training};

use super::Runner;
use crate::harness::{Case, Fed, MODULE_LR, Res, probe_sum};

pub fn cases() -> Vec<(&'static str, Runner)> {
    vec![
        // LSTM
        ("lstm/default", |c| {
            c.fed(LstmConfig::new(4, 5, true).init(&c.device), |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("lstm/seq-first", |c| {
            let lstm = LstmConfig::new(4, 5, true).with_batch_first(false).init(&c.device);
            c.fed(lstm, |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("lstm/batch-first", |c| {
            c.fed(LstmConfig::new(4, 5, true).init(&c.device), |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("lstm/no-bias", |c| {
            c.fed(LstmConfig::new(4, 5, false).init(&c.device), |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("lstm/initial-state", |c| {
            let lstm = LstmConfig::new(4, 5, true).init(&c.device);
            train_fed(c, TorchNames::new(), lstm, |l, x: Tensor<3>, step| {
                // PyTorch's (h0, c0) are [layers, batch, hidden]; burn's state is (cell, hidden).
                let h0 = step.float_input::<3>("h0")?.squeeze_dim::<2>(0);
                let c0 = step.float_input::<3>("c0")?.squeeze_dim::<2>(0);
                Ok(l.forward(x, Some(LstmState::new(c0, h0))).0)
            })
        }),
        ("lstm/two-layers", |c| {
            let layer = || LstmConfig::new(4, 5, true).init(&c.device);
            let lstm = TwoLayerLstm { l0: layer(), l1: LstmConfig::new(5, 5, true).init(&c.device) };
            let names = TorchNames::new()
                .rename(r"^layer\.l0\.", "layer.")?
                .rename(r"^layer\.l1\.(\w+)_l0$", "layer.${1}_l1")?;
            fed_named(c, names, lstm, |l, x: Tensor<3>| l.forward(x))
        }),
        // Bidirectional LSTM
        ("bilstm/default", |c| {
            c.fed(BiLstmConfig::new(4, 5, true).init(&c.device), |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("bilstm/batch-first", |c| {
            let lstm = BiLstmConfig::new(4, 5, true).with_batch_first(true).init(&c.device);
            c.fed(lstm, |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("bilstm/initial-state", |c| {
            let lstm = BiLstmConfig::new(4, 5, true).init(&c.device);
            train_fed(c, TorchNames::new(), lstm, |l, x: Tensor<3>, step| {
                // [directions, batch, hidden], as PyTorch's; burn's state is (cell, hidden).
                let (h0, c0) = (step.float_input::<3>("h0")?, step.float_input::<3>("c0")?);
                Ok(l.forward(x, Some(LstmState::new(c0, h0))).0)
            })
        }),
        // GRU (batch-first only)
        ("gru/default", |c| {
            c.fed(GruConfig::new(4, 5, true).init(&c.device), |l, x: Tensor<3>| l.forward(x, None))
        }),
        ("gru/batch-first", |c| {
            let gru = GruConfig::new(4, 5, true).with_reset_after(true).init(&c.device);
            c.fed(gru, |l, x: Tensor<3>| l.forward(x, None))
        }),
        ("gru/no-bias", |c| {
            c.fed(GruConfig::new(4, 5, false).init(&c.device), |l, x: Tensor<3>| l.forward(x, None))
        }),
        ("gru/initial-state", |c| {
            let gru = GruConfig::new(4, 5, true).init(&c.device);
            train_fed(c, TorchNames::new(), gru, |l, x: Tensor<3>, step| {
                let h0 = step.float_input::<3>("h0")?.squeeze_dim::<2>(0);
                Ok(l.forward(x, Some(h0)))
            })
        }),
        ("gru/reset-before", |c| {
            let gru = GruConfig::new(4, 5, true).with_reset_after(false).init(&c.device);
            c.fed(gru, |l, x: Tensor<3>| l.forward(x, None))
        }),
        ("bigru/batch-first", |c| {
            c.fed(BiGruConfig::new(4, 5, true).init(&c.device), |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        // Elman RNN: one gate, named as nn.RNN names it.
        ("rnn/default", |c| {
            let rnn = RnnConfig::new(4, 5, true).init(&c.device);
            fed_named(c, rnn_names()?, rnn, |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("rnn/batch-first", |c| {
            let rnn = RnnConfig::new(4, 5, true).with_batch_first(true).init(&c.device);
            fed_named(c, rnn_names()?, rnn, |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("rnn/relu-no-bias", |c| {
            let rnn = RnnConfig::new(4, 5, false)
                .with_hidden_activation(ActivationConfig::Relu)
                .init(&c.device);
            fed_named(c, rnn_names()?, rnn, |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        ("birnn/batch-first", |c| {
            let rnn = BiRnnConfig::new(4, 5, true).init(&c.device);
            let names = TorchNames::new()
                .rename(r"^layer\.forward\.gate\.input_transform\.(\w+)$", "layer.${1}_ih_l0")?
                .rename(r"^layer\.forward\.gate\.hidden_transform\.(\w+)$", "layer.${1}_hh_l0")?
                .rename(r"^layer\.reverse\.gate\.input_transform\.(\w+)$", "layer.${1}_ih_l0_reverse")?
                .rename(r"^layer\.reverse\.gate\.hidden_transform\.(\w+)$", "layer.${1}_hh_l0_reverse")?;
            fed_named(c, names, rnn, |l, x: Tensor<3>| l.forward(x, None).0)
        }),
        // Multi-head attention
        ("multihead_attention/default", |c| {
            let mha = MultiHeadAttentionConfig::new(8, 2).init(&c.device);
            c.fed(mha, |l, x: Tensor<3>| l.forward(MhaInput::self_attn(x)).context)
        }),
        ("multihead_attention/no-dropout", |c| {
            let mha = MultiHeadAttentionConfig::new(8, 2).with_dropout(0.0).init(&c.device);
            c.fed(mha, |l, x: Tensor<3>| l.forward(MhaInput::self_attn(x)).context)
        }),
        ("multihead_attention/no-bias", |c| {
            let mha = MultiHeadAttentionConfig::new(8, 2)
                .with_dropout(0.0)
                .with_query_bias(false)
                .with_key_bias(false)
                .with_value_bias(false)
                .with_output_bias(false)
                .init(&c.device);
            c.fed(mha, |l, x: Tensor<3>| l.forward(MhaInput::self_attn(x)).context)
        }),
        ("multihead_attention/key-padding-mask", padded_attention),
        ("multihead_attention/all-keys-masked", padded_attention),
        ("multihead_attention/causal-mask", |c| {
            let mha = MultiHeadAttentionConfig::new(8, 2).with_dropout(0.0).init(&c.device);
            train_fed(c, TorchNames::new(), mha, |l, x: Tensor<3>, step| {
                let [batch, seq, _] = x.dims();
                let causal: Tensor<3, Bool> = step
                    .int_input::<2>("causal")?
                    .equal_elem(1)
                    .unsqueeze_dim::<3>(0)
                    .expand([batch, seq, seq]);
                Ok(l.forward(MhaInput::self_attn(x).mask_attn(causal)).context)
            })
        }),
        ("multihead_attention/cross", |c| {
            let mha = MultiHeadAttentionConfig::new(8, 2).with_dropout(0.0).init(&c.device);
            train_fed(c, TorchNames::new(), mha, |l, x: Tensor<3>, step| {
                let memory = step.float_input::<3>("memory")?;
                Ok(l.forward(MhaInput::new(x, memory.clone(), memory)).context)
            })
        }),
        ("multihead_attention/square-subsequent-mask", |c| {
            let mha = MultiHeadAttentionConfig::new(8, 2).with_dropout(0.0).init(&c.device);
            c.fed(mha, |l, x: Tensor<3>| {
                let [batch, seq, _] = x.dims();
                let causal = generate_autoregressive_mask(batch, seq, &x.device());
                l.forward(MhaInput::self_attn(x).mask_attn(causal)).context
            })
        }),
        // Transformer encoder
        ("transformer_encoder_layer/default", |c| {
            encoder_layer(c, TransformerEncoderConfig::new(8, 16, 2, 1))
        }),
        ("transformer_encoder_layer/activation", |c| {
            encoder_layer(c, TransformerEncoderConfig::new(8, 16, 2, 1).with_dropout(0.0))
        }),
        ("transformer_encoder_layer/post-norm", |c| {
            let config = TransformerEncoderConfig::new(8, 16, 2, 1)
                .with_dropout(0.0)
                .with_activation(ActivationConfig::Relu)
                .with_norm_first(false)
                .with_layer_norm_eps(1e-5);
            encoder_layer(c, config)
        }),
        ("transformer_encoder_layer/norm-first", |c| {
            let config = TransformerEncoderConfig::new(8, 16, 2, 1)
                .with_dropout(0.0)
                .with_activation(ActivationConfig::Relu)
                .with_norm_first(true);
            encoder_layer(c, config)
        }),
        ("transformer_encoder_layer/eps-gelu", |c| {
            let config = TransformerEncoderConfig::new(8, 16, 2, 1)
                .with_dropout(0.0)
                .with_activation(ActivationConfig::Gelu)
                .with_layer_norm_eps(1e-3);
            encoder_layer(c, config)
        }),
        ("transformer_encoder_layer/key-padding-mask", |c| {
            let config = TransformerEncoderConfig::new(8, 16, 2, 1)
                .with_dropout(0.0)
                .with_activation(ActivationConfig::Relu);
            let layer = TransformerEncoderLayer::new(&config, &c.device);
            train_fed(c, transformer_names()?, layer, |l, x: Tensor<3>, step| {
                let pad = step.int_input::<2>("pad")?.equal_elem(1);
                Ok(l.forward(x, Some(pad), None))
            })
        }),
        ("transformer_encoder/two-layers", |c| {
            let encoder = TransformerEncoderConfig::new(8, 16, 2, 2)
                .with_dropout(0.0)
                .with_activation(ActivationConfig::Relu)
                .init(&c.device);
            fed_named(c, transformer_names()?, encoder, |l, x: Tensor<3>| {
                l.forward(TransformerEncoderInput::new(x))
            })
        }),
        // Transformer decoder
        ("transformer_decoder/post-norm", |c| decoder(c, false, false)),
        ("transformer_decoder/causal", |c| decoder(c, false, true)),
        ("transformer_decoder/norm-first", |c| decoder(c, true, false)),
        // Rotary position embedding
        ("rotary_encoding/interleaved", |c| {
            c.fed(RotaryEncodingConfig::new(6, 8).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("rotary_encoding/rotate-half", |c| {
            c.fed(RotaryEncodingConfig::new(6, 8).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("rotary_encoding/theta", |c| {
            let rope = RotaryEncodingConfig::new(6, 8).with_theta(500.0).init(&c.device);
            c.fed(rope, |l, x: Tensor<3>| l.forward(x))
        }),
        ("rotary_encoding/long", |c| {
            c.fed(RotaryEncodingConfig::new(1024, 4).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        // Sinusoidal position encoding
        ("positional_encoding/long", |c| {
            c.fed(PositionalEncodingConfig::new(4).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("positional_encoding/default", |c| {
            c.fed(PositionalEncodingConfig::new(8).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("positional_encoding/timescale", |c| {
            let pe = PositionalEncodingConfig::new(8)
                .with_max_sequence_size(6)
                .with_max_timescale(100)
                .init(&c.device);
            c.fed(pe, |l, x: Tensor<3>| l.forward(x))
        }),
    ]
}

/// Two `Lstm`s, the second fed the first's output: `nn.LSTM(num_layers=2)` (whose layer 1 is
/// PyTorch's `*_l1`).
#[derive(Module, Debug)]
struct TwoLayerLstm {
    l0: Lstm,
    l1: Lstm,
}

impl TwoLayerLstm {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.l1.forward(self.l0.forward(x, None).0, None).0
    }
}

/// A one-layer `TransformerDecoder` (ReLU, no dropout) on the batch's `memory`, with the batch's
/// `causal` target mask when `causal`.
fn decoder(c: &Case, norm_first: bool, causal: bool) -> Res<()> {
    let decoder = TransformerDecoderConfig::new(8, 16, 2, 1)
        .with_dropout(0.0)
        .with_activation(ActivationConfig::Relu)
        .with_norm_first(norm_first)
        .init(&c.device);
    let names = transformer_names()?
        .rename(r"\.cross_attn\.", ".multihead_attn.")?
        .rename(r"\.norm_3\.", ".norm3.")?;
    train_fed(c, names, decoder, move |l, x: Tensor<3>, step| {
        let memory = step.float_input::<3>("memory")?;
        let mut input = TransformerDecoderInput::new(x.clone(), memory);
        if causal {
            let [batch, seq, _] = x.dims();
            let mask: Tensor<3, Bool> = step
                .int_input::<2>("causal")?
                .equal_elem(1)
                .unsqueeze_dim::<3>(0)
                .expand([batch, seq, seq]);
            input = input.target_mask_attn(mask);
        }
        Ok(l.forward(input))
    })
}

/// `MultiHeadAttention` (no dropout) with the key padding mask `pad` (1: padding) of the batch.
fn padded_attention(c: &Case) -> Res<()> {
    let mha = MultiHeadAttentionConfig::new(8, 2).with_dropout(0.0).init(&c.device);
    train_fed(c, TorchNames::new(), mha, |l, x: Tensor<3>, step| {
        let pad = step.int_input::<2>("pad")?.equal_elem(1);
        Ok(l.forward(MhaInput::self_attn(x).mask_pad(pad)).context)
    })
}

/// One `TransformerEncoderLayer` of `config`, fed from `x` without masks.
fn encoder_layer(c: &Case, config: TransformerEncoderConfig) -> Res<()> {
    let layer = TransformerEncoderLayer::new(&config, &c.device);
    fed_named(c, transformer_names()?, layer, |l, x: Tensor<3>| l.forward(x, None, None))
}

/// `nn.RNN`'s names for `Rnn`'s one gate: its input and hidden `Linear`s.
fn rnn_names() -> Res<TorchNames> {
    Ok(TorchNames::new().table([
        ("layer.gate.input_transform.weight", "layer.weight_ih_l0"),
        ("layer.gate.input_transform.bias", "layer.bias_ih_l0"),
        ("layer.gate.hidden_transform.weight", "layer.weight_hh_l0"),
        ("layer.gate.hidden_transform.bias", "layer.bias_hh_l0"),
    ])?)
}

/// `nn.TransformerEncoderLayer`'s names for burn's fields (burn's `norm_1`/`norm_2` by name, as a
/// port renames them: see the norm-first case for what that loads where).
fn transformer_names() -> Res<TorchNames> {
    Ok(TorchNames::new()
        .rename(r"\.mha\.", ".self_attn.")?
        .rename(r"\.pwff\.linear_inner\.", ".linear1.")?
        .rename(r"\.pwff\.linear_outer\.", ".linear2.")?
        .rename(r"\.norm_1\.", ".norm1.")?
        .rename(r"\.norm_2\.", ".norm2.")?)
}

/// A module case like `Case::fed` whose tensors need the renames `names`.
fn fed_named<L: Module + ModuleDisplay, const DI: usize, const DO: usize>(
    c: &Case,
    names: TorchNames,
    layer: L,
    forward: impl Fn(&L, Tensor<DI>) -> Tensor<DO>,
) -> Res<()> {
    train_fed(c, names, layer, |l, x, _| Ok(forward(l, x)))
}

/// A module case whose forward pass also reads the batch (masks), its tensors named with `names`:
/// `layer` fed from `x`, the output dotted with the probe, one SGD step.
fn train_fed<L: Module + ModuleDisplay, const DI: usize, const DO: usize>(
    c: &Case,
    names: TorchNames,
    layer: L,
    forward: impl Fn(&L, Tensor<DI>, &mut Step<'_>) -> Res<Tensor<DO>>,
) -> Res<()> {
    let init = c.init.clone().with_names(names.clone());
    let model = init.load_module(Fed { x: c.param::<DI>("x")?, layer })?;
    Training::new(OptimizerSpec::sgd(MODULE_LR))
        .with_names(names)
        .with_loss_fn("probe_sum")
        .run(c.args, &init, &c.device, model, |m: &Fed<L, DI>, step| {
            let y = forward(&m.layer, m.x.val(), step)?;
            step.tap().activation("layer", &y)?; // as a port taps its layers, and as Case::fed does
            let loss = probe_sum(&y, step)?;
            Ok((y, loss))
        })?;
    Ok(())
}

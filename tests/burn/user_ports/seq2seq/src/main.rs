//! The burn port of `model.py` (a small seq2seq Transformer, post-norm, one encoder and one
//! decoder layer, tied embedding/head, Noam schedule), checked by `burnside check`.
//!
//! `-- --bug NAME` builds one porting slip in (see `Bug`), so one build serves every check.

use burn::module::{Module, Param};
use burn::nn::activation::ActivationConfig;
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::nn::transformer::{
    TransformerDecoder, TransformerDecoderConfig, TransformerDecoderInput, TransformerEncoder,
    TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::{Bool, Device, Int, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TorchNames, TraceError, Training};

const VOCAB: usize = 20;
const PAD: i64 = 0;
const BOS: i64 = 1;
const D_MODEL: usize = 32;
const N_HEADS: usize = 2;
const D_FF: usize = 64;
const WARMUP: f64 = 4.0;
const MAX_LEN: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bug {
    None,
    NoCausal,
    NoSrcPad,
    PadInverted,
    NoSmoothing,
    NoIgnore,
    Memory,
    NoamOffset,
    Untied,
    AdamEps,
}

impl Bug {
    fn parse(name: Option<String>) -> Result<Self, String> {
        Ok(match name.as_deref() {
            None | Some("none") => Bug::None,
            Some("no-causal") => Bug::NoCausal,
            Some("no-src-pad") => Bug::NoSrcPad,
            Some("pad-inverted") => Bug::PadInverted,
            Some("no-smoothing") => Bug::NoSmoothing,
            Some("no-ignore") => Bug::NoIgnore,
            Some("memory") => Bug::Memory,
            Some("noam-offset") => Bug::NoamOffset,
            Some("untied") => Bug::Untied,
            Some("adam-eps") => Bug::AdamEps,
            Some(other) => return Err(format!("unknown --bug {other}")),
        })
    }
}

/// The output head's own tensors: PyTorch's `head.bias`; its weight is the embedding's (tied),
/// unless the `untied` slip gives it a copy of its own (`head.weight`).
#[derive(Module, Debug)]
struct Head {
    weight: Option<Param<Tensor<2>>>,
    bias: Param<Tensor<1>>,
}

#[derive(Module, Debug)]
struct Model {
    embed: Embedding,
    encoder: TransformerEncoder,
    decoder: TransformerDecoder,
    head: Head,
}

impl Model {
    fn new(device: &Device) -> Self {
        let encoder = TransformerEncoderConfig::new(D_MODEL, D_FF, N_HEADS, 1)
            .with_dropout(0.0)
            .with_activation(ActivationConfig::Relu)
            .init(device);
        let decoder = TransformerDecoderConfig::new(D_MODEL, D_FF, N_HEADS, 1)
            .with_dropout(0.0)
            .with_activation(ActivationConfig::Relu)
            .init(device);
        Self {
            embed: EmbeddingConfig::new(VOCAB, D_MODEL).init(device),
            encoder,
            decoder,
            head: Head { weight: None, bias: Param::from_tensor(Tensor::zeros([VOCAB], device)) },
        }
    }

    /// token embedding * sqrt(d_model) + the positional table's first `len` rows
    fn embed_pos(&self, ids: Tensor<2, Int>, pe: &Tensor<3>, tap: &mut Tap, name: &str)
        -> Result<Tensor<3>, TraceError> {
        let [_, len] = ids.dims();
        let e = self.embed.forward(ids);
        tap.activation(name, &e)?;
        Ok(e.mul_scalar((D_MODEL as f64).sqrt()) + pe.clone().slice([0..1, 0..len, 0..D_MODEL]))
    }

    fn forward(&self, src: Tensor<2, Int>, tgt_in: Tensor<2, Int>, pe: &Tensor<3>, bug: Bug,
               mut tap: Tap) -> Result<Tensor<3>, TraceError> {
        let [batch, tgt_len] = tgt_in.dims();
        let src_pad: Tensor<2, Bool> = if bug == Bug::PadInverted {
            src.clone().not_equal_elem(PAD)
        } else {
            src.clone().equal_elem(PAD)
        };
        let tgt_pad: Tensor<2, Bool> = tgt_in.clone().equal_elem(PAD);

        let x = self.embed_pos(src, pe, &mut tap, "embed")?;
        let mut enc_in = TransformerEncoderInput::new(x.clone());
        if bug != Bug::NoSrcPad {
            enc_in = enc_in.mask_pad(src_pad.clone());
        }
        let memory = self.encoder.forward(enc_in);
        tap.activation("encoder.layers.0", &memory)?;
        tap.activation("encoder", &memory)?;

        let y = self.embed_pos(tgt_in, pe, &mut tap, "embed#2")?;
        let memory = if bug == Bug::Memory { x } else { memory };
        let mut dec_in = TransformerDecoderInput::new(y, memory).target_mask_pad(tgt_pad);
        if bug != Bug::NoCausal {
            dec_in = dec_in.target_mask_attn(generate_autoregressive_mask(batch, tgt_len, &self.embed.weight.device()));
        }
        if bug != Bug::NoSrcPad {
            dec_in = dec_in.memory_mask_pad(src_pad);
        }
        let out = self.decoder.forward(dec_in);
        tap.activation("decoder.layers.0", &out)?;
        tap.activation("decoder", &out)?;

        // the head: tied to the embedding ([vocab, d_model]), or its own copy (the slip)
        let w = match &self.head.weight {
            Some(w) => w.val(),
            None => self.embed.weight.val(),
        };
        let logits = out.matmul(w.transpose().unsqueeze::<3>()) + self.head.bias.val().unsqueeze::<3>();
        tap.activation("head", &logits)?;
        Ok(logits)
    }
}

/// Teacher forcing: BOS, then the target without its last token.
fn shift_right(tgt: Tensor<2, Int>) -> Tensor<2, Int> {
    let [batch, len] = tgt.dims();
    let bos = Tensor::<2, Int>::ones([batch, 1], &tgt.device()).mul_scalar(BOS);
    Tensor::cat(vec![bos, tgt.slice([0..batch, 0..len - 1])], 1)
}

/// LambdaLR's factor at scheduler step s: d_model^-0.5 * min(s^-0.5, s * warmup^-1.5), s = max(s, 1)
fn noam(s: usize) -> f64 {
    let s = s.max(1) as f64;
    (D_MODEL as f64).powf(-0.5) * s.powf(-0.5).min(s * WARMUP.powf(-1.5))
}

/// model.py's sinusoidal_table: pe[0, p, 2i] = sin(p * w_i), pe[0, p, 2i + 1] = cos(p * w_i),
/// w_i = exp(2i * -ln(10000) / d_model), computed in f64 and rounded once to f32.
fn sinusoidal_table(max_len: usize, d_model: usize, device: &Device) -> Tensor<3> {
    let mut values = vec![0f32; max_len * d_model];
    for p in 0..max_len {
        for i in (0..d_model).step_by(2) {
            let w = (i as f64 * (-(10000f64).ln() / d_model as f64)).exp();
            values[p * d_model + i] = (p as f64 * w).sin() as f32;
            values[p * d_model + i + 1] = (p as f64 * w).cos() as f32;
        }
    }
    Tensor::<1>::from_floats(values.as_slice(), device).reshape([1, max_len, d_model])
}

fn names() -> Result<TorchNames, TraceError> {
    TorchNames::new()
        .rename(r"^encoder\.layers\.(\d+)\.mha\.", "encoder.layers.$1.self_attn.")?
        .rename(r"^decoder\.layers\.(\d+)\.cross_attn\.", "decoder.layers.$1.multihead_attn.")?
        .rename(r"^(encoder|decoder)\.layers\.(\d+)\.pwff\.linear_inner\.", "$1.layers.$2.linear1.")?
        .rename(r"^(encoder|decoder)\.layers\.(\d+)\.pwff\.linear_outer\.", "$1.layers.$2.linear2.")?
        .rename(r"^(encoder|decoder)\.layers\.(\d+)\.norm_(\d)\.", "$1.layers.$2.norm$3.")
}

fn main() {
    burnside_trace::run_port("user_seq2seq", |mut args: PortArgs| {
        let bug = Bug::parse(args.value("--bug")?)?;
        args.finish()?;
        let device = Device::default().autodiff();
        let names = names()?;
        let init = InitFile::read(&args.init)?.with_names(names.clone());
        let mut model = init.load_module(Model::new(&device))?;
        if bug == Bug::Untied {
            // the slip: a head of its own, initialised from the embedding, instead of tying it
            let w = model.embed.weight.val().detach();
            model.head.weight = Some(Param::from_tensor(w));
        }
        // the persistent buffer `pe` ([1, max_len, d_model]): from the init file where it has it,
        // else computed as model.py's sinusoidal_table does
        let pe: Tensor<3> = match init.buffer("pe") {
            Some(pe) => Tensor::from_data(pe.to_data(), &device),
            None => sinusoidal_table(MAX_LEN, D_MODEL, &device),
        };

        let ce: CrossEntropyLoss = match bug {
            Bug::NoSmoothing => CrossEntropyLossConfig::new().with_pad_tokens(Some(vec![0])),
            Bug::NoIgnore => CrossEntropyLossConfig::new().with_smoothing(Some(0.1)),
            _ => CrossEntropyLossConfig::new().with_pad_tokens(Some(vec![0])).with_smoothing(Some(0.1)),
        }
        .init(&device);

        // torch.optim.Adam(lr=1.0, betas=(0.9, 0.98), eps=1e-9) with LambdaLR(noam)
        let eps = if bug == Bug::AdamEps { 1e-5 } else { 1e-9 };
        let spec = OptimizerSpec::adam(1.0).with_betas(0.9, 0.98).with_eps(eps);
        let offset = if bug == Bug::NoamOffset { 1 } else { 0 };
        let training = Training::new(spec)
            .with_names(names)
            .with_lr_schedule(move |k| 1.0 * noam(k + offset))
            .with_loss_fn("seq2seq_loss");
        training.run(&args, &init, &device, model, |model, step| {
            let src = step.int_input::<2>("src")?;
            let tgt = step.int_input::<2>("tgt")?;
            let logits = model.forward(src, shift_right(tgt.clone()), &pe, bug, step.tap())?;
            let [b, t, v] = logits.dims();
            let loss = ce.forward(logits.clone().reshape([b * t, v]), tgt.reshape([b * t]));
            Ok((logits, loss))
        })?;
        Ok(())
    });
}

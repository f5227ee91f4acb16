//! The burn port of `burnside.examples.attention`: Embedding -> MultiHeadAttention (4 heads) ->
//! residual -> LayerNorm -> mean over the sequence -> Linear head, AdamW (lr 0.01, weight decay
//! 0.01), written the way rust/README.md tells a user to port a model.
//!
//! ```text
//! attention --init INIT -o OUT [--steps N] [--bug dropout|no-warmup]
//! ```
//!
//! The learning rate warms up linearly over the first two steps, as PyTorch's `LambdaLR` does.
//! `--bug dropout` builds the attention with burn's default `MultiHeadAttentionConfig`, whose
//! dropout on the attention weights is 0.1 where `nn.MultiheadAttention`'s is 0: the port
//! trains with a random mask PyTorch never applies. `--bug no-warmup` leaves the schedule out.

use std::error::Error;

use burn::module::Module;
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, Training};

const VOCAB: usize = 16;
const D_MODEL: usize = 16;
const HEADS: usize = 4;
const CLASSES: usize = 3;
const LR: f64 = 0.01;
const WARMUP: usize = 2;

#[derive(Module, Debug)]
struct Encoder {
    emb: Embedding,
    attn: MultiHeadAttention,
    ln: LayerNorm,
    head: Linear,
}

impl Encoder {
    fn new(device: &Device, bug: Option<&str>) -> Result<Self, String> {
        let attn = match bug {
            None | Some("no-warmup") => {
                MultiHeadAttentionConfig::new(D_MODEL, HEADS).with_dropout(0.0)
            }
            Some("dropout") => MultiHeadAttentionConfig::new(D_MODEL, HEADS),
            Some(other) => return Err(format!("--bug {other}: expected dropout or no-warmup")),
        };
        Ok(Self {
            emb: EmbeddingConfig::new(VOCAB, D_MODEL).init(device),
            attn: attn.init(device),
            ln: LayerNormConfig::new(D_MODEL).init(device),
            head: LinearConfig::new(D_MODEL, CLASSES).init(device),
        })
    }

    fn forward(&self, tokens: Tensor<2, Int>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let h = self.emb.forward(tokens);
        tap.activation("emb", &h)?;
        let attended = self.attn.forward(MhaInput::self_attn(h.clone())).context;
        tap.activation("attn", &attended)?;
        let h = self.ln.forward(h + attended);
        tap.activation("ln", &h)?;
        let logits = self.head.forward(h.mean_dim(1).squeeze_dim(1));
        tap.activation("head", &logits)?;
        Ok(logits)
    }
}

fn main() {
    burnside_trace::run_port("attention", run);
}

fn run(mut args: PortArgs) -> Result<(), Box<dyn Error>> {
    let bug = args.value("--bug")?;
    args.finish()?;
    let device = Device::default().autodiff();
    let init = InitFile::read(&args.init)?;
    let model = init.load_module(Encoder::new(&device, bug.as_deref())?)?;
    let ce = CrossEntropyLossConfig::new().init(&device);
    let mut training = Training::new(OptimizerSpec::adamw(LR)).with_loss_fn("cross_entropy");
    if bug.as_deref() != Some("no-warmup") {
        // LambdaLR(opt, lambda k: min(1, (k + 1) / WARMUP))
        training = training.with_lr_schedule(|k| LR * ((k + 1) as f64 / WARMUP as f64).min(1.0));
    }
    training.run(&args, &init, &device, model, |model, step| {
        let (x, y) = (step.int_input::<2>("x")?, step.int_input::<1>("y")?);
        let logits = model.forward(x, step.tap())?;
        let loss = ce.forward(logits.clone(), y);
        Ok((logits, loss))
    })?;
    Ok(())
}

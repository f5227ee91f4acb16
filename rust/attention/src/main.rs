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
use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, TraceRecorder};

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
    let mut model = init.load_module(Encoder::new(&device, bug.as_deref())?)?;
    let x = init.int_input::<2>("x", &device)?;
    let y = init.int_input::<1>("y", &device)?;
    let ce = CrossEntropyLossConfig::new().init(&device);
    let spec = OptimizerSpec::adamw(LR);
    let mut optim = spec.init();
    let mut recorder = TraceRecorder::new(spec.clone());
    let mut losses = Vec::with_capacity(args.steps);

    burnside_trace::step_done(0, args.steps);
    for step in 0..args.steps {
        recorder.input(step, "x", x.to_data())?;
        recorder.input(step, "y", y.to_data())?;
        recorder.params_before(step, &model)?;
        let logits = model.forward(x.clone(), recorder.tap(step))?;
        recorder.logits(step, &logits)?;
        let loss = ce.forward(logits, y.clone());
        recorder.loss(step, &loss)?;
        losses.push(loss.clone().into_scalar::<f32>());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        recorder.grads(step, &model, &grads)?;
        let lr = if bug.as_deref() == Some("no-warmup") {
            spec.lr()
        } else {
            let lr = spec.lr() * ((step + 1) as f64 / WARMUP as f64).min(1.0);
            recorder.lr(step, lr);
            lr
        };
        model = optim.step(lr, model, grads);
        recorder.params_after(step, &model)?;
        recorder.optim(step, &model, &optim)?;
        burnside_trace::step_done(step + 1, args.steps);
    }
    let loss_after = ce.forward(model.forward(x, Tap::off())?, y);
    recorder.loss_after(args.steps - 1, &loss_after)?;
    recorder.write(&args.out)?;

    let loss_after: f32 = loss_after.into_scalar();
    println!("losses {losses:?}  loss_after {loss_after}");
    println!(
        "JSON: {}",
        serde_json::json!({"trace": args.out, "losses": losses, "loss_after": loss_after})
    );
    Ok(())
}

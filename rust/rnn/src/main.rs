//! The burn port of `burnside.examples.rnn`: Embedding -> GRU -> bidirectional LSTM -> Linear,
//! Adam (lr 0.01) with gradients clipped by their global norm (0.2, PyTorch's
//! `clip_grad_norm_`), written the way rust/README.md tells a user to port a model.
//!
//! ```text
//! rnn --init INIT -o OUT [--steps N] [--bug batch-first|no-clip|per-tensor-clip]
//! ```
//!
//! Each `--bug` is a porting slip that fails nothing and trains something else:
//! - `batch-first`: the LSTM left at burn's default; PyTorch's recurrent layers are
//!   sequence-first, so `[6, 4, 16]` is read as 6 sequences of 4 steps.
//! - `no-clip`: the `clip_grad_norm_` line not ported.
//! - `per-tensor-clip`: burn's own `GradientClippingConfig::Norm(0.2)` on the optimizer, which
//!   clips each tensor by its own norm rather than all of them by their joint norm.

use std::error::Error;

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{
    BiLstm, BiLstmConfig, Embedding, EmbeddingConfig, Gru, GruConfig, Linear, LinearConfig,
};
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor};
use burnside_trace::{
    ClipGradNorm, InitFile, OptimizerSpec, PortArgs, Tap, TraceError, TraceRecorder,
};

const LR: f64 = 0.01;
const CLIP: f32 = 0.2;
const VOCAB: usize = 12;
const D_EMB: usize = 8;
const D_HIDDEN: usize = 16;

#[derive(Module, Debug)]
struct CharRnn {
    emb: Embedding,
    gru: Gru,
    lstm: BiLstm,
    head: Linear,
}

impl CharRnn {
    fn new(device: &Device, bug: Option<&str>) -> Result<Self, String> {
        let mut lstm = BiLstmConfig::new(D_HIDDEN, D_HIDDEN, true);
        if bug != Some("batch-first") {
            lstm = lstm.with_batch_first(false);
        }
        Ok(Self {
            emb: EmbeddingConfig::new(VOCAB, D_EMB).init(device),
            gru: GruConfig::new(D_EMB, D_HIDDEN, true).init(device),
            lstm: lstm.init(device),
            head: LinearConfig::new(2 * D_HIDDEN, VOCAB).init(device),
        })
    }

    /// Token ids `[seq, batch]` in, next-token logits `[seq * batch, vocab]` out.
    fn forward(&self, tokens: Tensor<2, Int>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let x = self.emb.forward(tokens);
        tap.activation("emb", &x)?;
        // burn's Gru reads `[batch, seq, features]` only; PyTorch's nn.GRU here is sequence-first.
        let x = self.gru.forward(x.swap_dims(0, 1), None).swap_dims(0, 1);
        tap.activation("gru", &x)?;
        let (x, _) = self.lstm.forward(x, None);
        tap.activation("lstm", &x)?;
        let x = self.head.forward(x);
        tap.activation("head", &x)?;
        Ok(x.flatten(0, 1))
    }
}

fn main() {
    burnside_trace::run_port("rnn", run);
}

fn run(mut args: PortArgs) -> Result<(), Box<dyn Error>> {
    let bug = args.value("--bug")?;
    args.finish()?;
    if let Some(other) = bug
        .as_deref()
        .filter(|b| !["batch-first", "no-clip", "per-tensor-clip"].contains(b))
    {
        return Err(
            format!("--bug {other}: expected batch-first, no-clip or per-tensor-clip").into(),
        );
    }
    let device = Device::default().autodiff();
    let init = InitFile::read(&args.init)?;
    let mut model = init.load_module(CharRnn::new(&device, bug.as_deref())?)?;
    let x = init.int_input::<2>("x", &device)?;
    let y = init.int_input::<1>("y", &device)?;
    let ce = CrossEntropyLossConfig::new().init(&device);
    let spec = OptimizerSpec::adam(LR);
    let clip = ClipGradNorm::new(CLIP);
    let mut optim = match bug.as_deref() {
        Some("per-tensor-clip") => AdamConfig::new()
            .with_epsilon(1e-8)
            .with_grad_clipping(Some(GradientClippingConfig::Norm(CLIP)))
            .init(),
        _ => spec.init(),
    };
    let mut recorder = TraceRecorder::new(spec.clone());
    if bug.as_deref() != Some("no-clip") {
        recorder = recorder.with_clip_grad_norm(clip);
    }
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
        let grads = match bug.as_deref() {
            Some("no-clip" | "per-tensor-clip") => grads,
            _ => clip.apply(&model, grads),
        };
        model = optim.step(spec.lr(), model, grads);
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

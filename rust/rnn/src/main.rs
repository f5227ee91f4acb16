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
//! - `no-clip`: the `clip_grad_norm_` line not ported (`with_clip_grad_norm` left out).
//! - `per-tensor-clip`: a loop written call by call that declares PyTorch's clipping and clips
//!   with burn's own `GradientClippingConfig::Norm(0.2)` on the optimizer, which clips each
//!   tensor by its own norm rather than all of them by their joint norm.

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
    ClipGradNorm, InitFile, OptimizerSpec, PortArgs, Step, Tap, TraceError, TraceRecorder, Training,
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
    let model = init.load_module(CharRnn::new(&device, bug.as_deref())?)?;
    let ce = CrossEntropyLossConfig::new().init(&device);
    let forward_loss = |model: &CharRnn, step: &mut Step| -> Result<_, Box<dyn Error>> {
        let (x, y) = (step.int_input::<2>("x")?, step.int_input::<1>("y")?);
        let logits = model.forward(x, step.tap())?;
        let loss = ce.forward(logits.clone(), y);
        Ok((logits, loss))
    };
    match bug.as_deref() {
        Some("per-tensor-clip") => per_tensor_clip(&args, &init, &device, model, forward_loss),
        Some("no-clip") => {
            Training::new(OptimizerSpec::adam(LR)) // the clip_grad_norm_ line not ported
                .with_loss_fn("cross_entropy")
                .run(&args, &init, &device, model, forward_loss)
                .map(drop)
        }
        _ => Training::new(OptimizerSpec::adam(LR))
            .with_loss_fn("cross_entropy")
            .with_clip_grad_norm(CLIP)
            .run(&args, &init, &device, model, forward_loss)
            .map(drop),
    }
}

/// `--bug per-tensor-clip`: a loop written call by call (`TraceRecorder`, for loops `Training`
/// does not cover) that declares PyTorch's clipping but clips with burn's own
/// `GradientClippingConfig::Norm` on the optimizer, each tensor by its own norm.
fn per_tensor_clip(
    args: &PortArgs,
    init: &InitFile,
    device: &Device,
    mut model: CharRnn,
    mut forward_loss: impl FnMut(&CharRnn, &mut Step) -> Result<(Tensor<2>, Tensor<1>), Box<dyn Error>>,
) -> Result<(), Box<dyn Error>> {
    let spec = OptimizerSpec::adam(LR);
    let mut optim = AdamConfig::new()
        .with_epsilon(1e-8)
        .with_grad_clipping(Some(GradientClippingConfig::Norm(CLIP)))
        .init();
    let mut recorder = TraceRecorder::new(spec.clone())
        .with_loss_fn("cross_entropy")
        .with_clip_grad_norm(ClipGradNorm::new(CLIP));
    for step in 0..args.steps {
        recorder.params_before(step, &model)?;
        let (logits, loss) = forward_loss(&model, &mut recorder.step(step, init, device))?;
        recorder.logits(step, &logits)?;
        recorder.loss(step, &loss)?;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        recorder.grads(step, &model, &grads)?;
        model = optim.step(spec.lr(), model, grads); // the bug: no ClipGradNorm::apply
        recorder.params_after(step, &model)?;
        recorder.optim(step, &model, &optim)?;
    }
    let (_, loss_after) =
        forward_loss(&model, &mut Step::unrecorded(args.steps - 1, init, device))?;
    recorder.loss_after(args.steps - 1, &loss_after)?;
    recorder.write(&args.out)?;
    Ok(())
}

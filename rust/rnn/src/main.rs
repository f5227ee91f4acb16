//! The burn port of `burnside.examples.rnn`: Embedding -> GRU -> bidirectional LSTM -> Linear,
//! Adam (lr 0.01), written the way rust/README.md tells a user to port a model.
//!
//! ```text
//! rnn --init INIT -o OUT [--steps N] [--bug batch-first]
//! ```
//!
//! PyTorch's recurrent layers are sequence-first by default, burn's `Lstm`/`BiLstm` batch-first.
//! `--bug batch-first` leaves the LSTM at burn's default, the porting slip this example exists
//! to show: the shapes still fit (`[6, 4, 16]` is read as 6 sequences of 4 steps), nothing fails,
//! and the LSTM computes something else.

use std::error::Error;

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{
    BiLstm, BiLstmConfig, Embedding, EmbeddingConfig, Gru, GruConfig, Linear, LinearConfig,
};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, TraceRecorder};

const LR: f64 = 0.01;
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
        match bug {
            None => lstm = lstm.with_batch_first(false),
            Some("batch-first") => {}
            Some(other) => return Err(format!("--bug {other}: expected batch-first")),
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
    let device = Device::default().autodiff();
    let init = InitFile::read(&args.init)?;
    let mut model = init.load_module(CharRnn::new(&device, bug.as_deref())?)?;
    let x = init.int_input::<2>("x", &device)?;
    let y = init.int_input::<1>("y", &device)?;
    let ce = CrossEntropyLossConfig::new().init(&device);
    let spec = OptimizerSpec::adam(LR);
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

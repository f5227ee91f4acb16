//! S1: N training steps on A1 (SGD lr 0.1, SGD lr 0.1 with momentum 0.9, Adam lr 0.01 with
//! eps 1e-8, AdamW lr 0.01 with eps 1e-8 and weight decay 0.01, or any of `a1::optimizer_named`'s:
//! RMSprop, Adagrad, Adafactor, Muon on the two weights, L-BFGS), recorded as a burnside trace
//! with `burnside-trace`.
//!
//! ```text
//! train-step -o burn.safetensors [--steps N] [--optim NAME] [--f32-inputs] [--init INIT]
//! ```
//!
//! `NAME` is one of `a1::OPTIMIZERS`, with settings as `a1::optimizer_named` reads them.
//!
//! Without `--init` the model and batch are A1 built in Rust (f64, rounded once to f32);
//! `--f32-inputs` computes inputs and biases in f32 instead (S3). With `--init` the parameters
//! and the batch come from a `burnside.torch.export_init` file, the contract `burnside check`
//! uses for any port. The last line is `JSON: {...}` with the losses.

use std::error::Error;
use std::path::PathBuf;

use a1::{Arithmetic, Mlp, a1_data_with, a1_model_with, ce};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, TraceRecorder};

/// Command-line options.
struct Options {
    out: PathBuf,
    steps: usize,
    optimizer: OptimizerSpec,
    arithmetic: Arithmetic,
    init: Option<PathBuf>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut out = None;
    let mut steps = 1;
    let mut optimizer = OptimizerSpec::sgd(a1::SGD_LR);
    let mut arithmetic = Arithmetic::F64RoundedOnce;
    let mut init = None;
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "-o" | "--out" => out = Some(PathBuf::from(value()?)),
            "--steps" => steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--optim" => {
                optimizer = a1::optimizer_named(&value()?)?;
            }
            "--f32-inputs" => arithmetic = Arithmetic::F32,
            "--init" => init = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let out = out.ok_or("missing -o FILE")?;
    if steps == 0 {
        return Err("--steps must be at least 1".to_string());
    }
    Ok(Options {
        out,
        steps,
        optimizer,
        arithmetic,
        init,
    })
}

fn main() {
    // The error's Display (not Debug) is the last stderr line, which burnside reports.
    if let Err(error) = run() {
        eprintln!("train-step: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let options = parse(std::env::args().skip(1))?;
    let device = Device::default().autodiff();
    let (mut model, x, y): (Mlp, Tensor<2>, Tensor<1, Int>) = match &options.init {
        Some(path) => {
            let init = InitFile::read(path)?;
            let model = init.load_module(a1_model_with(&device, options.arithmetic))?;
            (
                model,
                init.float_input_at::<2>(0, "x", &device)?,
                init.int_input_at::<1>(0, "y", &device)?,
            )
        }
        None => {
            let (x, y) = a1_data_with(&device, options.arithmetic);
            (a1_model_with(&device, options.arithmetic), x, y)
        }
    };
    let muon = matches!(options.optimizer, OptimizerSpec::Muon { .. });
    if muon {
        // torch.optim.Muon holds the two weights only: A1 freezes the biases on both sides
        for bias in [&mut model.fc1.bias, &mut model.fc2.bias] {
            *bias = bias.take().map(|b| b.set_require_grad(false));
        }
    }
    let trained = if muon { 2 } else { 4 };
    let ce = ce(&device);
    let lr = options.optimizer.lr();
    let mut lbfgs = options.optimizer.init_lbfgs();
    let mut optim = match lbfgs {
        Some(_) => OptimizerSpec::sgd(lr).init(),
        None => options.optimizer.init(),
    };
    let mut recorder = TraceRecorder::new(options.optimizer.clone()).with_loss_fn("cross_entropy");
    let mut losses = Vec::with_capacity(options.steps);

    burnside_trace::step_done(0, options.steps);
    for step in 0..options.steps {
        recorder.input(step, "x", x.to_data())?;
        recorder.input(step, "y", y.to_data())?;
        recorder.params_before(step, &model)?;
        let logits = model.forward(x.clone());
        recorder.logits(step, &logits)?;
        let loss = ce.forward(logits, y.clone());
        recorder.loss(step, &loss)?;
        losses.push(loss.clone().into_scalar::<f32>());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        debug_assert_eq!(
            grads.len(),
            trained,
            "every trained A1 parameter has a gradient"
        );
        recorder.grads(step, &model, &grads)?;
        if let Some(lbfgs) = lbfgs.as_mut() {
            // L-BFGS steps the whole model, re-evaluating the loss at the parameters it tries
            let closure = |m: Mlp| {
                let loss = ce.forward(m.forward(x.clone()), y.clone());
                let value = f64::from(loss.clone().into_scalar::<f32>());
                (value, GradientsParams::from_grads(loss.backward(), &m))
            };
            model = lbfgs.step(lr, model, closure).0;
        } else {
            model = optim.step(lr, model, grads);
        }
        recorder.params_after(step, &model)?;
        // L-BFGS keeps one state for the whole model, recorded by neither side: `optim` is a
        // plain SGD then, whose empty state says the step was taken
        recorder.optim(step, &model, &optim)?;
        burnside_trace::step_done(step + 1, options.steps);
    }
    let loss_after = ce.forward(model.forward(x.clone()), y.clone());
    recorder.loss_after(options.steps - 1, &loss_after)?;
    recorder.write(&options.out)?;

    let loss_after: f32 = loss_after.into_scalar();
    println!("losses {losses:?}  loss_after {loss_after}");
    println!(
        "JSON: {}",
        serde_json::json!({"trace": options.out, "losses": losses, "loss_after": loss_after})
    );
    Ok(())
}

//! The pages' silent failures, recorded as burnside traces, so `burnside compare` can be
//! seen naming each one from what burn actually computed.
//!
//! ```text
//! bugs --bug discard|othergrads|epsilon -o burn.safetensors [--steps N] [--optim sgd|adam]
//! ```
//!
//! - `discard`: `optim.step(lr, model.clone(), grads);` — the update is dropped (S8, S12);
//!   with Adam the optimizer's moments and step count still advance (S13).
//! - `othergrads`: `GradientsParams::from_grads(loss.backward(), &other)` with a re-initialised
//!   `other` (same values, new ParamIds): `len() == 0`, nothing is updated (S6, S14).
//! - `epsilon`: Adam from `AdamConfig::new()`, burn's default epsilon 1e-5 instead of
//!   PyTorch's 1e-8 (the trace's metadata says so).
//!
//! Everything else is `train-step`'s loop. The last line is `JSON: {...}` with the losses.

use std::error::Error;
use std::path::PathBuf;

use a1::{a1_data, a1_model, ce};
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::Device;
use burnside_trace::{OptimizerSpec, TraceRecorder};

/// Which of the pages' bugs to build into the loop.
#[derive(Clone, Copy, PartialEq)]
enum Bug {
    Discard,
    OtherGrads,
    Epsilon,
}

struct Options {
    bug: Bug,
    out: PathBuf,
    steps: usize,
    adam: bool,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut bug, mut out, mut steps, mut adam) = (None, None, 1, false);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--bug" => {
                bug = Some(match value()?.as_str() {
                    "discard" => Bug::Discard,
                    "othergrads" => Bug::OtherGrads,
                    "epsilon" => Bug::Epsilon,
                    other => {
                        return Err(format!(
                            "--bug {other}: expected discard, othergrads or epsilon"
                        ));
                    }
                })
            }
            "-o" | "--out" => out = Some(PathBuf::from(value()?)),
            "--steps" => steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--optim" => {
                adam = match value()?.as_str() {
                    "sgd" => false,
                    "adam" => true,
                    other => return Err(format!("--optim {other}: expected sgd or adam")),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let bug = bug.ok_or("missing --bug discard|othergrads|epsilon")?;
    if steps == 0 {
        return Err("--steps must be at least 1".to_string());
    }
    Ok(Options {
        bug,
        out: out.ok_or("missing -o FILE")?,
        steps,
        adam: adam || bug == Bug::Epsilon,
    })
}

/// The optimizer as the buggy program builds it, and the spec its trace reports.
fn optimizer(options: &Options) -> Result<(ModuleOptimizer, OptimizerSpec), Box<dyn Error>> {
    if options.bug == Bug::Epsilon {
        let config = AdamConfig::new(); // burn's default epsilon: the bug
        // The fields are private; the config's own serialization reports the defaults it holds.
        let fields = serde_json::to_value(&config)?;
        let field = |name: &str| {
            fields[name]
                .as_f64()
                .map(|v| v as f32)
                .ok_or(format!("AdamConfig has no {name}"))
        };
        let spec = OptimizerSpec::Adam {
            lr: a1::ADAM_LR,
            betas: (field("beta_1")?, field("beta_2")?),
            eps: field("epsilon")?,
            weight_decay: 0.0,
            amsgrad: false,
        };
        return Ok((config.init(), spec));
    }
    let spec = if options.adam {
        OptimizerSpec::adam(a1::ADAM_LR)
    } else {
        OptimizerSpec::sgd(a1::SGD_LR)
    };
    Ok((spec.init(), spec))
}

fn main() {
    if let Err(error) = run() {
        eprintln!("bugs: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let options = parse(std::env::args().skip(1))?;
    let device = Device::default().autodiff();
    let (x, y) = a1_data(&device);
    let mut model = a1_model(&device);
    let other = a1_model(&device); // same values, new ParamIds (for `othergrads`)
    let ce = ce(&device);
    let (mut optim, spec) = optimizer(&options)?;
    let lr = spec.lr();
    let mut recorder = TraceRecorder::new(spec);
    let mut losses = Vec::with_capacity(options.steps);

    for step in 0..options.steps {
        recorder.input(step, "x", x.to_data())?;
        recorder.input(step, "y", y.to_data())?;
        recorder.params_before(step, &model)?;
        let logits = model.forward(x.clone());
        recorder.logits(step, &logits)?;
        let loss = ce.forward(logits, y.clone());
        recorder.loss(step, &loss)?;
        losses.push(loss.clone().into_scalar::<f32>());
        match options.bug {
            Bug::Discard => {
                let grads = GradientsParams::from_grads(loss.backward(), &model);
                recorder.grads(step, &model, &grads)?;
                optim.step(lr, model.clone(), grads); // the bug: the updated model is dropped
            }
            Bug::OtherGrads => {
                let grads = GradientsParams::from_grads(loss.backward(), &other); // the bug
                recorder.grads(step, &model, &grads)?;
                model = optim.step(lr, model, grads);
            }
            Bug::Epsilon => {
                let grads = GradientsParams::from_grads(loss.backward(), &model);
                recorder.grads(step, &model, &grads)?;
                model = optim.step(lr, model, grads);
            }
        }
        recorder.params_after(step, &model)?;
        recorder.optim(step, &model, &optim)?;
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

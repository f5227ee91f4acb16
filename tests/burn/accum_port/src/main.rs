//! A two-layer MLP port of a PyTorch loop that accumulates gradients over micro-batches
//! (`burnside.torch.record(..., accumulate=M)`), to test how burnside compares and diagnoses
//! gradient accumulation.
//!
//! ```text
//! accum_port --init INIT -o OUT --steps N --accumulate M [--optim sgd|adam] [--manual]
//!            [--bug step-each|mean|optim-in-loop|lr-decay|loss-mean|none]
//! ```
//!
//! The faithful port is `Training::with_accumulation(M)`; `--manual` is the same loop written call
//! by call with `TraceRecorder` and burn's `GradientsAccumulator` (the trace is the same bit for
//! bit). The bugs are the slips of a port of such a loop:
//!
//! - `step-each`: an optimizer step after every micro-batch (M steps where PyTorch takes one);
//! - `mean`: `backward` on each loss divided by M, so the accumulated gradient is the mean where
//!   PyTorch's `.grad` is the sum (the losses recorded as computed);
//! - `optim-in-loop`: one batch per step (no accumulation), the optimizer built inside the step loop
//!   (`spec.init()` at every step), so its state (Adam's moments and step count) starts anew at every
//!   step: step 0 agrees, the rest do not;
//! - `lr-decay`: one batch per step, the learning rate halved at every step after the first (a
//!   schedule PyTorch's loop does not have, unrecorded): step 0 agrees, the rest do not;
//! - `loss-mean`: the closure returns each loss divided by M, where PyTorch's `loss_fn` does not;
//! - `none`: no accumulation at all, one batch per step (`Training::new` alone).

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use burnside_trace::{
    InitFile, OptimizerSpec, PortArgs, Step, TraceRecorder, Training, UsageError,
};

#[derive(Module, Debug)]
struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(4, 8).init(device),
            fc2: LinearConfig::new(8, 3).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.fc2.forward(relu(self.fc1.forward(x)))
    }
}

fn main() {
    burnside_trace::run_port("accum_port", |mut args: PortArgs| {
        let m: usize = match args.value("--accumulate")? {
            Some(text) => text
                .parse()
                .map_err(|e| UsageError(format!("--accumulate {text}: {e}")))?,
            None => 1,
        };
        let spec = match args.value("--optim")?.as_deref() {
            None | Some("sgd") => OptimizerSpec::sgd(0.1),
            Some("adam") => OptimizerSpec::adam(0.01),
            Some(other) => return Err(UsageError(format!("--optim {other}: sgd or adam")).into()),
        };
        let manual = args.flag("--manual");
        let bug = args.value("--bug")?;
        args.finish()?;

        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let model = init.load_module(Mlp::new(&device))?;
        let ce = CrossEntropyLossConfig::new().init(&device);
        let forward_loss = |model: &Mlp, step: &mut Step<'_>| {
            let x = step.float_input::<2>("x")?;
            let y = step.int_input::<1>("y")?;
            let logits = model.forward(x);
            let loss = ce.forward(logits.clone(), y);
            Ok::<_, Box<dyn std::error::Error>>((logits, loss))
        };
        match bug.as_deref() {
            None if !manual => {
                Training::new(spec)
                    .with_accumulation(m)
                    .with_loss_fn("cross_entropy")
                    .run(&args, &init, &device, model, forward_loss)?;
            }
            Some("loss-mean") => {
                Training::new(spec)
                    .with_accumulation(m)
                    .with_loss_fn("cross_entropy")
                    .run(&args, &init, &device, model, |model, step| {
                        let (logits, loss) = forward_loss(model, step)?;
                        Ok((logits, loss / m as f32))
                    })?;
            }
            Some("none") => {
                Training::new(spec).with_loss_fn("cross_entropy").run(
                    &args,
                    &init,
                    &device,
                    model,
                    forward_loss,
                )?;
            }
            Some(slip @ ("optim-in-loop" | "lr-decay")) => {
                plain_loop(&args, &init, &device, model, spec, slip, forward_loss)?
            }
            None | Some("step-each") | Some("mean") => {
                manual_loop(
                    &args,
                    &init,
                    &device,
                    model,
                    spec,
                    m,
                    bug.as_deref(),
                    forward_loss,
                )?;
            }
            Some(other) => {
                return Err(UsageError(format!(
                    "--bug {other}: step-each, mean, optim-in-loop, lr-decay, loss-mean or none"
                ))
                .into())
            }
        }
        Ok(())
    });
}

/// The accumulating loop written call by call with `TraceRecorder`: the way a port whose loop
/// `Training` does not fit records the same trace as `Training::with_accumulation`.
#[allow(clippy::too_many_arguments)]
fn manual_loop(
    args: &PortArgs,
    init: &InitFile,
    device: &Device,
    mut model: Mlp,
    spec: OptimizerSpec,
    m: usize,
    bug: Option<&str>,
    forward_loss: impl Fn(
        &Mlp,
        &mut Step<'_>,
    ) -> Result<(Tensor<2>, Tensor<1>), Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut recorder = TraceRecorder::new(spec.clone())
        .with_accumulation(m)
        .with_loss_fn("cross_entropy");
    let mut optim = spec.init();
    for k in 0..args.steps {
        recorder.params_before(k, &model)?;
        let mut accumulator = GradientsAccumulator::<Mlp>::new();
        let mut total: Option<Tensor<1>> = None;
        for j in 0..m {
            let (logits, loss) =
                forward_loss(&model, &mut recorder.micro_step(k, j, init, device))?;
            recorder.micro_logits(k, j, &logits)?;
            recorder.micro_loss(k, j, &loss)?;
            let value = loss.clone().detach();
            total = Some(match total {
                None => value,
                Some(sum) => sum + value,
            });
            let backward = if bug == Some("mean") {
                loss / m as f32
            } else {
                loss
            };
            let grads = GradientsParams::from_grads(backward.backward(), &model);
            if bug == Some("step-each") {
                // the slip: one optimizer step per micro-batch
                if j + 1 == m {
                    recorder.grads(k, &model, &grads)?;
                }
                model = optim.step(spec.lr(), model, grads);
            } else {
                accumulator.accumulate(&model, grads);
            }
        }
        recorder.loss(k, &total.expect("micro-batches"))?;
        if bug != Some("step-each") {
            let grads = accumulator.grads();
            recorder.grads(k, &model, &grads)?;
            model = optim.step(spec.lr(), model, grads);
        }
        recorder.params_after(k, &model)?;
        recorder.optim(k, &model, &optim)?;
    }
    let last = args.steps - 1;
    let mut loss_after: Option<Tensor<1>> = None;
    for j in 0..m {
        let (_, loss) = forward_loss(
            &model,
            &mut Step::unrecorded(last, init, device).micro(j, m),
        )?;
        let loss = loss.detach();
        loss_after = Some(match loss_after {
            None => loss,
            Some(sum) => sum + loss,
        });
    }
    recorder.loss_after(last, &loss_after.expect("micro-batches"))?;
    recorder.write(&args.out)?;
    Ok(())
}

/// One batch per step, recorded call by call, with one of two slips of an optimizer port:
/// `optim-in-loop` builds the optimizer inside the loop; `lr-decay` halves the learning rate at every
/// step after the first, a schedule the PyTorch loop does not have (step 0 is the same).
fn plain_loop(
    args: &PortArgs,
    init: &InitFile,
    device: &Device,
    mut model: Mlp,
    spec: OptimizerSpec,
    bug: &str,
    forward_loss: impl Fn(
        &Mlp,
        &mut Step<'_>,
    ) -> Result<(Tensor<2>, Tensor<1>), Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut recorder = TraceRecorder::new(spec.clone()).with_loss_fn("cross_entropy");
    let build = || spec.init();
    let mut optim = build();
    for k in 0..args.steps {
        if bug == "optim-in-loop" {
            optim = build(); // the slip: a new optimizer, with new state, at every step
        }
        recorder.params_before(k, &model)?;
        let (logits, loss) = forward_loss(&model, &mut recorder.step(k, init, device))?;
        recorder.logits(k, &logits)?;
        recorder.loss(k, &loss)?;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        recorder.grads(k, &model, &grads)?;
        let lr = if bug == "lr-decay" {
            spec.lr() * 0.5f64.powi(k as i32) // the slip: a decay the PyTorch loop does not have
        } else {
            spec.lr()
        };
        model = optim.step(lr, model, grads);
        recorder.params_after(k, &model)?;
        recorder.optim(k, &model, &optim)?;
    }
    let last = args.steps - 1;
    let (_, loss) = forward_loss(&model, &mut Step::unrecorded(last, init, device))?;
    recorder.loss_after(last, &loss.detach())?;
    recorder.write(&args.out)?;
    Ok(())
}

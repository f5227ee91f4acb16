//! Every burn optimizer with a `torch.optim` twin, a few settings each, trained 3 steps on a small
//! `Linear(5, 4)` under the mean squared error of a batch `x` and `target`.
//!
//! Most cases train with `Training` and the settings given through `OptimizerSpec`, as a port
//! does. Two kinds are written call by call with `TraceRecorder` (`call_by_call`): L-BFGS, which
//! steps the whole model with a closure, and the `*/burn-default` cases, whose optimizer is built
//! from burn's own `XConfig::new()` while the trace declares PyTorch's defaults: a port that trusts
//! burn's defaults to be PyTorch's, so that the numbers, not the declared settings, show where
//! they differ.

use burn::module::Module;
use burn::nn::loss::{MseLoss, Reduction};
use burn::nn::{Linear, LinearConfig};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    AdaGradConfig, AdamConfig, AdamWConfig, GradientsParams, LBFGS, ModuleOptimizer, MuonConfig,
    RmsPropConfig, SgdConfig,
};
use burn::tensor::Tensor;
use burnside_trace::{OptimizerSpec, Step, TraceRecorder};

use super::Runner;
use crate::harness::{Case, Res};

/// The trained model: PyTorch's `nn.Linear(5, 4)` (its parameters `layer.weight`, `layer.bias`).
#[derive(Module, Debug)]
struct Net {
    layer: Linear,
}

/// The loss both sides name `mse_loss` (PyTorch: `F.mse_loss(layer(x), target)`).
const LOSS: &str = "mse_loss";

fn net(c: &Case, inputs: usize, bias: bool) -> Net {
    Net { layer: LinearConfig::new(inputs, 4).with_bias(bias).init(&c.device) }
}

/// One step's output and loss, the batch read (and recorded) through `step`.
fn forward(m: &Net, step: &mut Step<'_>) -> Res<(Tensor<2>, Tensor<1>)> {
    let x = step.float_input::<2>("x")?;
    let target = step.float_input::<2>("target")?;
    let y = m.layer.forward(x);
    let loss = MseLoss::new().forward(y.clone(), target, Reduction::Mean);
    Ok((y, loss))
}

/// `Linear(5, 4)` trained with `spec` by `Training`.
fn trained(c: &Case, spec: OptimizerSpec) -> Res<()> {
    c.train(spec, LOSS, net(c, 5, true), forward)
}

/// `Linear(inputs, 4, bias=False)` trained with `spec` (Muon takes 2-D parameters only).
fn trained_no_bias(c: &Case, inputs: usize, spec: OptimizerSpec) -> Res<()> {
    c.train(spec, LOSS, net(c, inputs, false), forward)
}

/// What steps the model in a loop written call by call.
// one value per case, moved once into the loop: the variants' sizes do not matter
#[allow(clippy::large_enum_variant)]
enum Stepper {
    /// A burn optimizer built by the case itself (burn's own defaults).
    Module(ModuleOptimizer),
    /// burn's L-BFGS, which re-evaluates the loss at the parameters it tries.
    Lbfgs(LBFGS),
}

/// The loop `Training` runs, written call by call with `TraceRecorder` (as rust/train-step does):
/// the trace declares `declared`, the model is stepped by `stepper`.
fn call_by_call(
    c: &Case,
    declared: OptimizerSpec,
    mut stepper: Stepper,
    inputs: usize,
    bias: bool,
) -> Res<()> {
    let mut model = c.init.load_module(net(c, inputs, bias))?;
    let mut recorder = TraceRecorder::new(declared.clone()).with_loss_fn(LOSS);
    let lr = declared.lr();
    // L-BFGS keeps one state for the whole model, which neither side records: a plain SGD's empty
    // state stands for it in the trace
    let empty = OptimizerSpec::sgd(lr).init();
    let steps = c.args.steps;
    burnside_trace::step_done(0, steps);
    for k in 0..steps {
        recorder.params_before(k, &model)?;
        let (output, loss) = forward(&model, &mut recorder.step(k, &c.init, &c.device))?;
        recorder.logits(k, &output)?;
        recorder.loss(k, &loss)?;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        recorder.grads(k, &model, &grads)?;
        let state = match &mut stepper {
            Stepper::Module(optim) => {
                model = optim.step(lr, model, grads);
                &*optim
            }
            Stepper::Lbfgs(lbfgs) => {
                let closure = |m: Net| {
                    let mut step = Step::unrecorded(k, &c.init, &c.device);
                    let (_, loss) = forward(&m, &mut step).expect("the batch was read at this step");
                    let value = f64::from(loss.clone().into_scalar::<f32>());
                    (value, GradientsParams::from_grads(loss.backward(), &m))
                };
                model = lbfgs.step(lr, model, closure).0;
                &empty
            }
        };
        recorder.params_after(k, &model)?;
        recorder.optim(k, &model, state)?;
        burnside_trace::step_done(k + 1, steps);
    }
    let last = steps - 1;
    let (_, loss_after) = forward(&model, &mut Step::unrecorded(last, &c.init, &c.device))?;
    recorder.loss_after(last, &loss_after.detach())?;
    recorder.write(&c.args.out)?;
    Ok(())
}

/// A port that builds burn's optimizer with `XConfig::new()` and declares PyTorch's `declared`.
fn burn_default(c: &Case, declared: OptimizerSpec, optim: ModuleOptimizer) -> Res<()> {
    call_by_call(c, declared, Stepper::Module(optim), 5, true)
}

/// L-BFGS with exactly `spec`'s settings.
fn lbfgs(c: &Case, spec: OptimizerSpec) -> Res<()> {
    let lbfgs = spec.init_lbfgs().expect("an L-BFGS spec");
    call_by_call(c, spec, Stepper::Lbfgs(lbfgs), 5, true)
}

pub fn cases() -> Vec<(&'static str, Runner)> {
    vec![
        // SGD
        ("sgd/plain", |c| trained(c, OptimizerSpec::sgd(0.1))),
        ("sgd/momentum", |c| trained(c, OptimizerSpec::sgd_momentum(0.1, 0.9))),
        ("sgd/momentum-dampening", |c| {
            trained(c, OptimizerSpec::sgd_momentum(0.1, 0.9).with_dampening(0.5))
        }),
        ("sgd/nesterov", |c| trained(c, OptimizerSpec::sgd_momentum(0.1, 0.9).with_nesterov(true))),
        ("sgd/weight-decay", |c| trained(c, OptimizerSpec::sgd(0.1).with_weight_decay(0.05))),
        ("sgd/momentum-weight-decay", |c| {
            trained(c, OptimizerSpec::sgd_momentum(0.1, 0.9).with_weight_decay(0.05))
        }),
        ("sgd/burn-default", |c| {
            let optim = SgdConfig::new().with_momentum(Some(MomentumConfig::new())).init();
            burn_default(c, OptimizerSpec::sgd_momentum(0.1, 0.9), optim)
        }),
        // Adam
        ("adam/default", |c| trained(c, OptimizerSpec::adam(1e-3))),
        ("adam/eps", |c| trained(c, OptimizerSpec::adam(0.01).with_eps(1e-6))),
        ("adam/betas", |c| trained(c, OptimizerSpec::adam(0.01).with_betas(0.8, 0.99))),
        ("adam/weight-decay", |c| trained(c, OptimizerSpec::adam(0.01).with_weight_decay(0.1))),
        ("adam/amsgrad", |c| trained(c, OptimizerSpec::adam(0.01).with_amsgrad(true))),
        ("adam/burn-default", |c| burn_default(c, OptimizerSpec::adam(0.01), AdamConfig::new().init())),
        // AdamW
        ("adamw/default", |c| trained(c, OptimizerSpec::adamw(1e-3))),
        ("adamw/weight-decay", |c| trained(c, OptimizerSpec::adamw(0.01).with_weight_decay(0.1))),
        ("adamw/amsgrad", |c| trained(c, OptimizerSpec::adamw(0.01).with_amsgrad(true))),
        ("adamw/burn-default", |c| {
            burn_default(c, OptimizerSpec::adamw(0.01), AdamWConfig::new().init())
        }),
        // RMSprop
        ("rmsprop/default", |c| trained(c, OptimizerSpec::rmsprop(0.01))),
        ("rmsprop/alpha", |c| trained(c, OptimizerSpec::rmsprop(0.01).with_alpha(0.9))),
        ("rmsprop/centered", |c| trained(c, OptimizerSpec::rmsprop(0.01).with_centered(true))),
        ("rmsprop/momentum", |c| trained(c, OptimizerSpec::rmsprop(0.01).with_momentum(0.5))),
        ("rmsprop/weight-decay", |c| trained(c, OptimizerSpec::rmsprop(0.01).with_weight_decay(0.1))),
        // burn's momentum 0.9 taken out, so that its epsilon shows alone
        ("rmsprop/burn-default", |c| {
            burn_default(c, OptimizerSpec::rmsprop(0.01), RmsPropConfig::new().with_momentum(0.0).init())
        }),
        // all of RmsPropConfig::new(): burn keeps a momentum buffer PyTorch's RMSprop(momentum=0) has not
        ("rmsprop/burn-default-momentum", |c| {
            burn_default(c, OptimizerSpec::rmsprop(0.01), RmsPropConfig::new().init())
        }),
        // Adagrad
        ("adagrad/default", |c| trained(c, OptimizerSpec::adagrad(0.1))),
        ("adagrad/lr-decay", |c| trained(c, OptimizerSpec::adagrad(0.1).with_lr_decay(0.1))),
        ("adagrad/eps", |c| trained(c, OptimizerSpec::adagrad(0.1).with_eps(1e-3))),
        ("adagrad/weight-decay", |c| trained(c, OptimizerSpec::adagrad(0.1).with_weight_decay(0.1))),
        // PyTorch's sum starts at 0.1; burn's AdaGrad has no such setting, so it starts at 0
        ("adagrad/initial-accumulator", |c| trained(c, OptimizerSpec::adagrad(0.1))),
        ("adagrad/burn-default", |c| {
            burn_default(c, OptimizerSpec::adagrad(0.1), AdaGradConfig::new().init())
        }),
        // Adafactor
        ("adafactor/default", |c| trained(c, OptimizerSpec::adafactor(1e-2))),
        ("adafactor/weight-decay", |c| trained(c, OptimizerSpec::adafactor(1e-2).with_weight_decay(0.1))),
        ("adafactor/settings", |c| {
            trained(c, OptimizerSpec::adafactor(1e-2).with_adafactor(-0.5, f32::EPSILON, 1e-2, 2.0))
        }),
        // Muon: PyTorch's [4, 5] weight is burn's [5, 4] (Linear keeps [in, out])
        ("muon/default", |c| trained_no_bias(c, 5, OptimizerSpec::muon(1e-3))),
        ("muon/square", |c| trained_no_bias(c, 4, OptimizerSpec::muon(1e-3))),
        ("muon/no-nesterov", |c| {
            let spec = OptimizerSpec::muon(0.02)
                .with_muon(false, (3.4445, -4.775, 2.0315), 1e-7, 5, "original")?;
            trained_no_bias(c, 4, spec)
        }),
        ("muon/match-rms-adamw", |c| {
            let spec = OptimizerSpec::muon(0.02)
                .with_muon(true, (3.4445, -4.775, 2.0315), 1e-7, 3, "match_rms_adamw")?;
            trained_no_bias(c, 5, spec)
        }),
        ("muon/burn-default", |c| {
            let optim = Stepper::Module(MuonConfig::new().init());
            call_by_call(c, OptimizerSpec::muon(0.02), optim, 4, false)
        }),
        // L-BFGS
        ("lbfgs/default", |c| lbfgs(c, OptimizerSpec::lbfgs(1.0))),
        ("lbfgs/max-iter-history", |c| lbfgs(c, OptimizerSpec::lbfgs(0.5).with_lbfgs(4, None, 3, false))),
        ("lbfgs/strong-wolfe", |c| lbfgs(c, OptimizerSpec::lbfgs(1.0).with_lbfgs(5, None, 10, true))),
    ]
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::optim::{GradientsParams, MuonConfig};
    use burn::tensor::{Device, Tensor, TensorData};

    use super::*;

    /// The reproducer of docs/burn-issues/muon-lr-adjustment-linear-layout.md: one layer, stored as
    /// burn's Linear stores it (`[in, out]`) and as PyTorch does (`[out, in]`), given the same
    /// gradient (transposed) and one Muon step: the Newton-Schulz update is the same matrix
    /// (transposed), but burn's "original" lr adjustment reads each shape as it is stored, so the
    /// step of the `[in, out]` weight is sqrt(5/4) times the other's.
    #[test]
    fn muons_lr_adjustment_reads_the_weight_as_stored() {
        let device = Device::default().autodiff();
        let p: Vec<f32> = (0..20).map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0).collect();
        let step = |shape: [usize; 2], transpose: bool| -> Vec<f32> {
            let layer = LinearConfig::new(shape[0], shape[1]).with_bias(false).init(&device);
            let layer = Linear {
                weight: Param::from_tensor(Tensor::<2>::zeros(shape, &device)),
                ..layer
            };
            let probe = Tensor::<2>::from_data(TensorData::new(p.clone(), [4, 5]), &device);
            let probe = if transpose { probe.transpose() } else { probe };
            let loss = (layer.weight.val() * probe).sum();
            let grads = GradientsParams::from_grads(loss.backward(), &layer);
            let mut optim = MuonConfig::new().init();
            let after = optim.step(0.02, layer, grads).weight.val();
            let after = if transpose { after.transpose() } else { after };
            after.into_data().try_to_vec::<f32>().expect("f32 parameters")
        };
        let burns = step([5, 4], true); // burn's Linear(5, 4): weight [in, out]
        let torchs = step([4, 5], false); // PyTorch's nn.Linear(5, 4): weight [out, in]
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let ratio = norm(&burns) / norm(&torchs);
        eprintln!("step norms: [in, out] {} [out, in] {} ratio {ratio}", norm(&burns), norm(&torchs));
        assert!((ratio - 1.25f32.sqrt()).abs() < 1e-5, "ratio {ratio}");
        for (b, t) in burns.iter().zip(&torchs) {
            assert!((b - t * 1.25f32.sqrt()).abs() < 1e-6, "{b} vs {t}");
        }
    }
}

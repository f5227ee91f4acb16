//! The burn port of model.py's denoiser. `--bug gn-groups|in-eps|prelu-channels|convt-pad|mse-sum|no-nesterov` builds a porting slip in.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig, ConvTranspose2d, ConvTranspose2dConfig};
use burn::nn::loss::{MseLoss, Reduction};
use burn::nn::{GroupNorm, GroupNormConfig, InstanceNorm, InstanceNormConfig, PRelu, PReluConfig, PaddingConfig2d};
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, Training};

const LR: f64 = 0.05;
const STEPS: f64 = 3.0;

#[derive(Module, Debug)]
struct Model {
    inc: Conv2d,
    gn1: GroupNorm,
    act1: PRelu,
    down: Conv2d,
    inorm: InstanceNorm,
    act2: PRelu,
    up: ConvTranspose2d,
    gn2: GroupNorm,
    outc: Conv2d,
}

impl Model {
    fn new(device: &Device, bug: Option<&str>) -> Self {
        let same = PaddingConfig2d::Explicit(1, 1, 1, 1);
        Self {
            inc: Conv2dConfig::new([1, 8], [3, 3]).with_padding(same.clone()).init(device),
            gn1: GroupNormConfig::new(if bug == Some("gn-groups") { 2 } else { 4 }, 8).init(device),
            act1: PReluConfig::new().init(device),
            down: Conv2dConfig::new([8, 16], [3, 3]).with_stride([2, 2]).with_padding(same.clone()).init(device),
            inorm: InstanceNormConfig::new(16).with_affine(true).with_epsilon(if bug == Some("in-eps") { 1e-3 } else { 1e-5 }).init(device),
            act2: PReluConfig::new().with_num_parameters(if bug == Some("prelu-channels") { 1 } else { 16 }).init(device),
            up: ConvTranspose2dConfig::new([16, 8], [4, 4])
                .with_stride([2, 2])
                .with_padding(if bug == Some("convt-pad") { [0, 0] } else { [1, 1] })
                .init(device),
            gn2: GroupNormConfig::new(2, 8).init(device),
            outc: Conv2dConfig::new([16, 1], [3, 3]).with_padding(same).init(device),
        }
    }

    fn forward(&self, x: Tensor<4>, mut tap: Tap) -> Result<Tensor<4>, TraceError> {
        let x = self.inc.forward(x);
        tap.activation("inc", &x)?;
        let x = self.gn1.forward(x);
        tap.activation("gn1", &x)?;
        let h1 = self.act1.forward(x);
        tap.activation("act1", &h1)?;
        let x = self.down.forward(h1.clone());
        tap.activation("down", &x)?;
        let x = self.inorm.forward(x);
        tap.activation("inorm", &x)?;
        let h2 = self.act2.forward(x);
        tap.activation("act2", &h2)?;
        let u = self.up.forward(h2);
        tap.activation("up", &u)?;
        let u = self.gn2.forward(u);
        tap.activation("gn2", &u)?;
        let y = self.outc.forward(Tensor::cat(vec![u, h1], 1));
        tap.activation("outc", &y)?;
        Ok(y)
    }
}

fn main() {
    burnside_trace::run_port("user_unet", |mut args: PortArgs| {
        let bug = args.value("--bug")?;
        args.finish()?;
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let model = init.load_module(Model::new(&device, bug.as_deref()))?;
        let mse = MseLoss::new();
        let reduction = if bug.as_deref() == Some("mse-sum") { Reduction::Sum } else { Reduction::Mean };
        let spec = OptimizerSpec::sgd(LR).with_momentum(0.9).with_weight_decay(1e-4);
        let spec = if bug.as_deref() == Some("no-nesterov") { spec } else { spec.with_nesterov(true) };
        let training = Training::new(spec)
            .with_lr_schedule(|k| LR * (1.0 + (std::f64::consts::PI * k as f64 / STEPS).cos()) / 2.0)
            .with_loss_fn("mse_loss");
        training.run(&args, &init, &device, model, |model, step| {
            let x = step.float_input::<4>("x")?;
            let y = step.float_input::<4>("y")?;
            let out = model.forward(x, step.tap())?;
            let loss = mse.forward(out.clone(), y, reduction.clone());
            Ok((out, loss))
        })?;
        Ok(())
    });
}

//! The burn port of `model.py` (a small convolutional VAE), checked by `burnside check`.
//!
//! `--bug NAME` (after `--` in `burnside check`) builds one porting slip in:
//! kl-sign, kl-half, std-exp, bce-mean, no-relu-dec, output-padding, output-padding-pad,
//! eps-rng, eps-rng-recorded, adam-eps, kl-logvar. Without it the port is faithful.

use std::error::Error;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig, ConvTranspose2d, ConvTranspose2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::activation::{log_sigmoid, relu};
use burn::tensor::{Device, Distribution, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Step, Tap, TraceError, TraceRecorder, Training};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bug {
    None,
    KlSign,
    KlHalf,
    StdExp,
    BceMean,
    NoReluDec,
    OutputPadding,
    OutputPaddingPad,
    EpsRng,
    EpsRngRecorded,
    AdamEps,
    KlLogvar,
}

impl Bug {
    fn parse(name: Option<String>) -> Result<Bug, Box<dyn Error>> {
        Ok(match name.as_deref() {
            None => Bug::None,
            Some("kl-sign") => Bug::KlSign,
            Some("kl-half") => Bug::KlHalf,
            Some("std-exp") => Bug::StdExp,
            Some("bce-mean") => Bug::BceMean,
            Some("no-relu-dec") => Bug::NoReluDec,
            Some("output-padding") => Bug::OutputPadding,
            Some("output-padding-pad") => Bug::OutputPaddingPad,
            Some("eps-rng") => Bug::EpsRng,
            Some("eps-rng-recorded") => Bug::EpsRngRecorded,
            Some("adam-eps") => Bug::AdamEps,
            Some("kl-logvar") => Bug::KlLogvar,
            Some(other) => return Err(format!("unknown --bug {other}").into()),
        })
    }
}

const LATENT: usize = 8;
const BATCH: f64 = 8.0;

#[derive(Module, Debug)]
struct Model {
    enc_conv1: Conv2d,
    enc_conv2: Conv2d,
    fc_mu: Linear,
    fc_logvar: Linear,
    dec_fc: Linear,
    dec_conv1: ConvTranspose2d,
    dec_conv2: ConvTranspose2d,
}

impl Model {
    fn new(device: &Device, bug: Bug) -> Self {
        let conv = |cin, cout| {
            Conv2dConfig::new([cin, cout], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
        };
        let dec1_out_pad = match bug {
            Bug::OutputPadding | Bug::OutputPaddingPad => [0, 0],
            _ => [1, 1],
        };
        Self {
            enc_conv1: conv(1, 8),
            enc_conv2: conv(8, 16),
            fc_mu: LinearConfig::new(16 * 4 * 4, LATENT).init(device),
            fc_logvar: LinearConfig::new(16 * 4 * 4, LATENT).init(device),
            dec_fc: LinearConfig::new(LATENT, 16 * 4 * 4).init(device),
            dec_conv1: ConvTranspose2dConfig::new([16, 8], [3, 3])
                .with_stride([2, 2])
                .with_padding([1, 1])
                .with_padding_out(dec1_out_pad)
                .init(device),
            dec_conv2: ConvTranspose2dConfig::new([8, 1], [3, 3])
                .with_stride([2, 2])
                .with_padding([1, 1])
                .with_padding_out([1, 1])
                .init(device),
        }
    }

    /// (recon_logits, mu, logvar), as PyTorch's forward returns them.
    fn forward(
        &self,
        x: Tensor<4>,
        eps: Tensor<2>,
        mut tap: Tap,
        bug: Bug,
    ) -> Result<(Tensor<4>, Tensor<2>, Tensor<2>), TraceError> {
        let h = self.enc_conv1.forward(x);
        tap.activation("enc_conv1", &h)?;
        let h = relu(h);
        tap.activation("enc_act1", &h)?;
        let h = self.enc_conv2.forward(h);
        tap.activation("enc_conv2", &h)?;
        let h = relu(h);
        tap.activation("enc_act2", &h)?;
        let h = h.flatten::<2>(1, 3);
        let mu = self.fc_mu.forward(h.clone());
        tap.activation("fc_mu", &mu)?;
        let logvar = self.fc_logvar.forward(h);
        tap.activation("fc_logvar", &logvar)?;
        let std = match bug {
            Bug::StdExp => logvar.clone().exp(),
            _ => (logvar.clone() * 0.5).exp(),
        };
        let z = mu.clone() + eps * std;
        let d = self.dec_fc.forward(z);
        tap.activation("dec_fc", &d)?;
        let d = relu(d);
        tap.activation("dec_act1", &d)?;
        let [b, _] = d.dims();
        let d = d.reshape([b, 16, 4, 4]);
        let d = self.dec_conv1.forward(d);
        // the slip's "fix" for the shape error: pad the 7x7 map to 8x8 with zeros
        let d = match bug {
            Bug::OutputPaddingPad => d.pad((0, 1, 0, 1), 0.0),
            _ => d,
        };
        tap.activation("dec_conv1", &d)?;
        let d = match bug {
            Bug::NoReluDec => d,
            _ => relu(d),
        };
        tap.activation("dec_act2", &d)?;
        let recon = self.dec_conv2.forward(d);
        tap.activation("dec_conv2", &recon)?;
        Ok((recon, mu, logvar))
    }
}

/// F.binary_cross_entropy_with_logits(logits, x, reduction="sum") (burn's BinaryCrossEntropyLoss
/// takes integer targets and always averages, so it is written out with burn's own formula).
fn bce_with_logits(logits: Tensor<4>, x: Tensor<4>, bug: Bug) -> Tensor<1> {
    let per_element = (x.neg() + 1.0) * logits.clone() - log_sigmoid(logits);
    match bug {
        Bug::BceMean => per_element.mean(),
        _ => per_element.sum(),
    }
}

/// -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
fn kl(mu: Tensor<2>, logvar: Tensor<2>, bug: Bug) -> Tensor<1> {
    let var = match bug {
        Bug::KlLogvar => (logvar.clone() * 0.5).exp(),
        _ => logvar.clone().exp(),
    };
    let inner = (logvar + 1.0 - mu.powi_scalar(2) - var).sum();
    match bug {
        Bug::KlSign => inner * 0.5,
        Bug::KlHalf => inner * -1.0,
        _ => inner * -0.5,
    }
}

fn forward_loss(
    model: &Model,
    step: &mut Step<'_>,
    bug: Bug,
) -> Result<(Tensor<4>, Tensor<1>), Box<dyn Error>> {
    let x = step.float_input::<4>("x")?;
    let eps = match bug {
        Bug::EpsRng | Bug::EpsRngRecorded => {
            let [b, _, _, _] = x.dims();
            let eps = Tensor::<2>::random([b, LATENT], Distribution::Normal(0.0, 1.0), step.device());
            if bug == Bug::EpsRngRecorded {
                step.record_input("eps", eps.to_data())?;
            }
            eps
        }
        _ => step.float_input::<2>("eps")?,
    };
    let (recon, mu, logvar) = model.forward(x.clone(), eps, step.tap(), bug)?;
    step.output("1", &mu)?;
    step.output("2", &logvar)?;
    let loss = (bce_with_logits(recon.clone(), x, bug) + kl(mu, logvar, bug)) / BATCH;
    Ok((recon, loss))
}

fn main() {
    burnside_trace::run_port("user_vae", |mut args: PortArgs| {
        let bug = Bug::parse(args.value("--bug")?)?;
        args.finish()?;
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?; // PyTorch's starting weights and every step's batch
        let model = init.load_module(Model::new(&device, bug))?;
        // As record.py's torch.optim.Adam(model.parameters(), lr=1e-3), PyTorch's defaults otherwise.
        let spec = OptimizerSpec::adam(1e-3);
        if bug != Bug::AdamEps {
            Training::new(spec)
                .with_loss_fn("vae_loss")
                .run(&args, &init, &device, model, |model, step| forward_loss(model, step, bug))?;
            return Ok(());
        }
        // The slip: the loop written by hand with burn's AdamConfig::new() (epsilon 1e-5), while the
        // recorder declares PyTorch's Adam as record.py builds it.
        let lr = 1e-3;
        let mut optim = AdamConfig::new().init();
        let mut recorder = TraceRecorder::new(spec).with_loss_fn("vae_loss");
        let mut model = model;
        for k in 0..args.steps {
            recorder.lr(k, lr);
            recorder.params_before(k, &model)?;
            let mut step = recorder.step(k, &init, &device);
            let (logits, loss) = forward_loss(&model, &mut step, bug)?;
            recorder.logits(k, &logits)?;
            recorder.loss(k, &loss)?;
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            recorder.grads(k, &model, &grads)?;
            model = optim.step(lr, model, grads);
            recorder.params_after(k, &model)?;
            recorder.optim(k, &model, &optim)?;
        }
        let last = args.steps - 1;
        let (_, loss) = forward_loss(&model, &mut Step::unrecorded(last, &init, &device), bug)?;
        recorder.loss_after(last, &loss)?;
        recorder.write(&args.out)?;
        Ok(())
    });
}

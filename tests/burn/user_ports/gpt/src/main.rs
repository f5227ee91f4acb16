//! The burn port of model.py's tiny GPT. `--bug rms-eps|untied|no-mask|nodecay-wd` builds a porting slip in.

use burn::module::{Module, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::activation::{silu, softmax};
use burn::tensor::{Bool, Device, Int, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, Training};

const VOCAB: usize = 16;
const D: usize = 16;
const HEADS: usize = 2;
const T: usize = 8;
const LAYERS: usize = 2;
const HIDDEN: usize = 32;
const LR: f64 = 1e-2;
const WARMUP: f64 = 3.0;

#[derive(Module, Debug)]
struct Attn {
    c_attn: Linear,
    c_proj: Linear,
    masked: bool,
}

#[derive(Module, Debug)]
struct Mlp {
    w1: Linear,
    w3: Linear,
    w2: Linear,
}

#[derive(Module, Debug)]
struct Block {
    ln_1: RmsNorm,
    attn: Attn,
    ln_2: RmsNorm,
    mlp: Mlp,
}

#[derive(Module, Debug)]
struct Model {
    wte: Embedding,
    wpe: Embedding,
    h: Vec<Block>,
    ln_f: RmsNorm,
    lm_head: Option<Linear>,
}

fn rms(eps: f64, device: &Device) -> RmsNorm {
    RmsNormConfig::new(D).with_epsilon(eps).init(device)
}

fn linear(i: usize, o: usize, device: &Device) -> Linear {
    LinearConfig::new(i, o).with_bias(false).init(device)
}

impl Attn {
    fn forward(&self, x: Tensor<3>, p: &str, tap: &mut Tap) -> Result<Tensor<3>, TraceError> {
        let [b, t, c] = x.dims();
        let hs = c / HEADS;
        let qkv = self.c_attn.forward(x);
        tap.activation(&format!("{p}.c_attn"), &qkv)?;
        let parts = qkv.split(D, 2);
        let heads = |z: Tensor<3>| z.reshape([b, t, HEADS, hs]).swap_dims(1, 2);
        let (q, k, v) = (heads(parts[0].clone()), heads(parts[1].clone()), heads(parts[2].clone()));
        let mut att = q.matmul(k.swap_dims(2, 3)).mul_scalar(1.0 / (hs as f64).sqrt());
        if self.masked {
            let mask = Tensor::<2, Bool>::tril_mask([t, t], 0, &att.device());
            att = att.mask_fill(mask.unsqueeze::<4>(), f32::NEG_INFINITY);
        }
        let att = softmax(att, 3);
        let y = att.matmul(v).swap_dims(1, 2).reshape([b, t, c]);
        let y = self.c_proj.forward(y);
        tap.activation(&format!("{p}.c_proj"), &y)?;
        tap.activation(p, &y)?;
        Ok(y)
    }
}

impl Mlp {
    fn forward(&self, x: Tensor<3>, p: &str, tap: &mut Tap) -> Result<Tensor<3>, TraceError> {
        let a = self.w1.forward(x.clone());
        tap.activation(&format!("{p}.w1"), &a)?;
        let g = self.w3.forward(x);
        tap.activation(&format!("{p}.w3"), &g)?;
        let y = self.w2.forward(silu(a) * g);
        tap.activation(&format!("{p}.w2"), &y)?;
        tap.activation(p, &y)?;
        Ok(y)
    }
}

impl Model {
    fn new(device: &Device, bug: Option<&str>) -> Self {
        let eps = if bug == Some("rms-eps") { 1e-6 } else { f32::EPSILON as f64 };
        let h = (0..LAYERS)
            .map(|_| Block {
                ln_1: rms(eps, device),
                attn: Attn { c_attn: linear(D, 3 * D, device), c_proj: linear(D, D, device), masked: bug != Some("no-mask") },
                ln_2: rms(eps, device),
                mlp: Mlp { w1: linear(D, HIDDEN, device), w3: linear(D, HIDDEN, device), w2: linear(HIDDEN, D, device) },
            })
            .collect();
        Self {
            wte: EmbeddingConfig::new(VOCAB, D).init(device),
            wpe: EmbeddingConfig::new(T, D).init(device),
            h,
            ln_f: rms(eps, device),
            lm_head: None,
        }
    }

    fn forward(&self, idx: Tensor<2, Int>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let [b, t] = idx.dims();
        let tok = self.wte.forward(idx.clone());
        tap.activation("wte", &tok)?;
        let pos = Tensor::<1, Int>::arange(0..t as i64, &idx.device()).unsqueeze::<2>();
        let pe = self.wpe.forward(pos).reshape([t, D]);
        tap.activation("wpe", &pe)?;
        let mut x = tok + pe.unsqueeze::<3>();
        for (i, blk) in self.h.iter().enumerate() {
            let p = format!("h.{i}");
            let a = blk.ln_1.forward(x.clone());
            tap.activation(&format!("{p}.ln_1"), &a)?;
            x = x + blk.attn.forward(a, &format!("{p}.attn"), &mut tap)?;
            let m = blk.ln_2.forward(x.clone());
            tap.activation(&format!("{p}.ln_2"), &m)?;
            x = x + blk.mlp.forward(m, &format!("{p}.mlp"), &mut tap)?;
            tap.activation(&p, &x)?;
        }
        let x = self.ln_f.forward(x);
        tap.activation("ln_f", &x)?;
        let flat = x.reshape([b * t, D]);
        let logits = match &self.lm_head {
            Some(head) => head.forward(flat),
            None => flat.matmul(self.wte.weight.val().transpose()), // tied to wte
        };
        tap.activation("lm_head", &logits.clone().reshape([b, t, VOCAB]))?;
        Ok(logits)
    }
}

fn main() {
    burnside_trace::run_port("user_gpt", |mut args: PortArgs| {
        let bug = args.value("--bug")?;
        args.finish()?;
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let mut model = init.load_module(Model::new(&device, bug.as_deref()))?;
        if bug.as_deref() == Some("untied") {
            // a separate head, initialised from the embedding: trains on its own
            let mut head = linear(D, VOCAB, &device);
            head.weight = Param::from_tensor(model.wte.weight.val().transpose().detach());
            model.lm_head = Some(head);
        }
        let ce = CrossEntropyLossConfig::new().init(&device);
        let spec = OptimizerSpec::adamw(LR).with_betas(0.9, 0.95);
        let no_decay = if bug.as_deref() == Some("nodecay-wd") { spec.clone() } else { spec.clone().with_weight_decay(0.0) };
        let mut names = vec!["ln_f.weight".to_string()];
        for i in 0..LAYERS {
            names.push(format!("h.{i}.ln_1.weight"));
            names.push(format!("h.{i}.ln_2.weight"));
        }
        let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let training = Training::new(spec.with_weight_decay(0.1))
            .with_group(no_decay, &names)
            .with_clip_grad_norm(1.0)
            .with_lr_schedule(|k| LR * ((k + 1) as f64 / WARMUP).min(1.0))
            .with_loss_fn("cross_entropy");
        training.run(&args, &init, &device, model, |model, step| {
            let x = step.int_input::<2>("x")?;
            let y = step.int_input::<1>("y")?;
            let logits = model.forward(x, step.tap())?;
            let loss = ce.forward(logits.clone(), y);
            Ok((logits, loss))
        })?;
        Ok(())
    });
}

//! The burn port of `burnside.examples.transformer`: Embedding -> LayerNorm -> single-head
//! attention (Linear q/k/v/o) -> residual -> LayerNorm -> MLP with GELU -> residual -> mean over
//! the sequence -> Linear head, AdamW (lr 0.01, weight decay 0.01), written the way
//! rust/README.md tells a user to port a model.
//!
//! ```text
//! transformer --init INIT -o OUT [--steps N] [--bug gelu-tanh|ln-eps]
//! ```
//!
//! `--bug` builds one layer wrong on purpose, to show the comparison naming that layer:
//! `gelu-tanh` uses GELU's tanh approximation (PyTorch's `nn.GELU()` is the exact erf form),
//! `ln-eps` gives the second LayerNorm an epsilon of 1e-3 (PyTorch's is 1e-5).

use std::error::Error;

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::{gelu, gelu_approximate, softmax};
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, Training};

const VOCAB: usize = 16;
const D_MODEL: usize = 16;
const D_HIDDEN: usize = 32;
const CLASSES: usize = 3;
const LR: f64 = 0.01;

#[derive(Module, Debug)]
struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
}

#[derive(Module, Debug)]
struct Mlp {
    fc1: Linear,
    fc2: Linear,
    tanh_gelu: bool,
}

#[derive(Module, Debug)]
struct Block {
    emb: Embedding,
    ln1: LayerNorm,
    attn: Attention,
    ln2: LayerNorm,
    mlp: Mlp,
    head: Linear,
}

impl Attention {
    fn new(device: &Device) -> Self {
        // No biases, as in the PyTorch model (and most transformer code).
        let linear = || {
            LinearConfig::new(D_MODEL, D_MODEL)
                .with_bias(false)
                .init(device)
        };
        Self {
            q: linear(),
            k: linear(),
            v: linear(),
            o: linear(),
        }
    }

    fn forward(&self, x: Tensor<3>, tap: &mut Tap) -> Result<Tensor<3>, TraceError> {
        let q = self.q.forward(x.clone());
        tap.activation("attn.q", &q)?;
        let k = self.k.forward(x.clone());
        tap.activation("attn.k", &k)?;
        let v = self.v.forward(x);
        tap.activation("attn.v", &v)?;
        let scores = q
            .matmul(k.swap_dims(1, 2))
            .div_scalar((D_MODEL as f64).sqrt());
        let out = self.o.forward(softmax(scores, 2).matmul(v));
        tap.activation("attn.o", &out)?;
        tap.activation("attn", &out)?;
        Ok(out)
    }
}

impl Mlp {
    fn forward(&self, x: Tensor<3>, tap: &mut Tap) -> Result<Tensor<3>, TraceError> {
        let x = self.fc1.forward(x);
        tap.activation("mlp.fc1", &x)?;
        let x = if self.tanh_gelu {
            gelu_approximate(x)
        } else {
            gelu(x)
        };
        tap.activation("mlp.act", &x)?;
        let x = self.fc2.forward(x);
        tap.activation("mlp.fc2", &x)?;
        tap.activation("mlp", &x)?;
        Ok(x)
    }
}

impl Block {
    fn new(device: &Device, bug: Option<&str>) -> Result<Self, String> {
        let (mut tanh_gelu, mut ln2) = (false, LayerNormConfig::new(D_MODEL));
        match bug {
            None => {}
            Some("gelu-tanh") => tanh_gelu = true,
            Some("ln-eps") => ln2 = ln2.with_epsilon(1e-3),
            Some(other) => return Err(format!("--bug {other}: expected gelu-tanh or ln-eps")),
        }
        Ok(Self {
            emb: EmbeddingConfig::new(VOCAB, D_MODEL).init(device),
            ln1: LayerNormConfig::new(D_MODEL).init(device),
            attn: Attention::new(device),
            ln2: ln2.init(device),
            mlp: Mlp {
                fc1: LinearConfig::new(D_MODEL, D_HIDDEN).init(device),
                fc2: LinearConfig::new(D_HIDDEN, D_MODEL).init(device),
                tanh_gelu,
            },
            head: LinearConfig::new(D_MODEL, CLASSES).init(device),
        })
    }

    fn forward(
        &self,
        tokens: Tensor<2, burn::tensor::Int>,
        mut tap: Tap,
    ) -> Result<Tensor<2>, TraceError> {
        let h = self.emb.forward(tokens);
        tap.activation("emb", &h)?;
        let a = self.ln1.forward(h.clone());
        tap.activation("ln1", &a)?;
        let h = h + self.attn.forward(a, &mut tap)?;
        let m = self.ln2.forward(h.clone());
        tap.activation("ln2", &m)?;
        let h = h + self.mlp.forward(m, &mut tap)?;
        let logits = self.head.forward(h.mean_dim(1).squeeze_dim::<2>(1));
        tap.activation("head", &logits)?;
        Ok(logits)
    }
}

fn main() {
    burnside_trace::run_port("transformer", run);
}

fn run(mut args: PortArgs) -> Result<(), Box<dyn Error>> {
    let bug = args.value("--bug")?;
    args.finish()?;
    let device = Device::default().autodiff();
    let init = InitFile::read(&args.init)?;
    let model = init.load_module(Block::new(&device, bug.as_deref())?)?;
    let ce = CrossEntropyLossConfig::new().init(&device);
    let training = Training::new(OptimizerSpec::adamw(LR)).with_loss_fn("cross_entropy");
    training.run(&args, &init, &device, model, |model, step| {
        let (x, y) = (step.int_input::<2>("x")?, step.int_input::<1>("y")?);
        let logits = model.forward(x, step.tap())?;
        let loss = ce.forward(logits.clone(), y);
        Ok((logits, loss))
    })?;
    Ok(())
}

//! The burn port of the GPT-2-shaped model of `benchmarks/gpt2_scale.py`: token and learned
//! position embeddings, `L` pre-norm blocks (LayerNorm -> causal self-attention with one packed
//! `c_attn` Linear split into q, k, v, and `c_proj` -> residual -> LayerNorm -> MLP `c_fc`, tanh
//! GELU, `c_proj` -> residual), a final LayerNorm and the head tied to the token embedding,
//! cross-entropy over every position, Adam (lr 1e-4). The sizes are read from the init file
//! (`wte.weight` is `[vocab, d_model]`, `wpe.weight` `[context, d_model]`, one `h.{i}` per block).
//!
//! ```text
//! gpt2-bench --init INIT -o OUT [--steps N] [--heads H] [--no-record]
//! gpt2-bench --inference --init INIT -o OUT [--batches N] [--heads H]
//!            [--no-record | --tap-free | --taps-only]
//! ```
//!
//! `--heads` defaults to `d_model / 64` (GPT-2's head size). `--no-record` trains the same steps
//! with the same burn optimizer and writes nothing: the loop's own time and memory, which the
//! benchmark compares the recorded run with. `--inference` is the pretrained model's port: the
//! weights from a forward trace's init file on a device without autodiff, each batch's forward
//! pass recorded by `Inference` (with `--no-record`, the same passes, nothing written). What the
//! recording costs is measured by `benchmarks/capture_cost.py` with two more switches of
//! `--inference`: `--tap-free` runs the forward with its taps off (`Tap::off()`), so graph capture
//! alone records the layers; `--taps-only` records with `Inference::with_taps_only()` (the eager
//! forward, the taps only). Without either, the forward is tapped and captured, as a user's port
//! that kept its taps is.

use std::error::Error;

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::optim::GradientsParams;
use burn::tensor::activation::{gelu_approximate, softmax};
use burn::tensor::{Bool, Device, Int, Tensor};
use burnside_trace::{
    Inference, InitFile, OptimizerSpec, PortArgs, Step, Tap, TraceError, Training, UsageError,
    step_done,
};

const LR: f64 = 1e-4;

#[derive(Module, Debug)]
struct Attention {
    c_attn: Linear,
    c_proj: Linear,
    heads: usize,
}

#[derive(Module, Debug)]
struct Mlp {
    c_fc: Linear,
    c_proj: Linear,
}

#[derive(Module, Debug)]
struct Block {
    ln_1: LayerNorm,
    attn: Attention,
    ln_2: LayerNorm,
    mlp: Mlp,
}

#[derive(Module, Debug)]
struct Gpt {
    wte: Embedding,
    wpe: Embedding,
    h: Vec<Block>,
    ln_f: LayerNorm,
}

/// The model's sizes, as the init file holds them.
struct Sizes {
    vocab: usize,
    context: usize,
    d_model: usize,
    layers: usize,
    heads: usize,
}

impl Sizes {
    fn of(init: &InitFile, heads: Option<usize>) -> Result<Self, String> {
        let shape = |name: &str| {
            init.param(name)
                .map(|t| t.shape.clone())
                .ok_or_else(|| format!("the init file has no `{name}`: not this model's trace"))
        };
        let (wte, wpe) = (shape("wte.weight")?, shape("wpe.weight")?);
        let layers = (0..)
            .take_while(|i| init.param(&format!("h.{i}.ln_1.weight")).is_some())
            .count();
        let d_model = wte[1];
        let heads = heads.unwrap_or((d_model / 64).max(1));
        if d_model % heads != 0 {
            return Err(format!("--heads {heads} does not divide d_model {d_model}"));
        }
        Ok(Self {
            vocab: wte[0],
            context: wpe[0],
            d_model,
            layers,
            heads,
        })
    }
}

impl Attention {
    fn forward(&self, x: Tensor<3>, tap: &mut Tap, at: &str) -> Result<Tensor<3>, TraceError> {
        let [b, t, c] = x.dims();
        let (nh, hs) = (self.heads, c / self.heads);
        let qkv = self.c_attn.forward(x);
        tap.activation(&format!("{at}.c_attn"), &qkv)?;
        let mut parts = qkv.split(c, 2).into_iter();
        let mut head = || {
            parts
                .next()
                .expect("c_attn gives 3 * d_model features")
                .reshape([b, t, nh, hs])
                .swap_dims(1, 2)
        };
        let (q, k, v) = (head(), head(), head());
        let att = q.matmul(k.swap_dims(2, 3)) * (1.0 / (hs as f64).sqrt());
        // nanoGPT's causal mask (PyTorch's non-persistent `bias` buffer), computed here.
        let mask = Tensor::<2, Bool>::tril_mask([t, t], 0, &att.device()).unsqueeze::<4>();
        let att = softmax(att.mask_fill(mask, f32::NEG_INFINITY), 3);
        let y = att.matmul(v).swap_dims(1, 2).reshape([b, t, c]);
        let y = self.c_proj.forward(y);
        tap.activation(&format!("{at}.c_proj"), &y)?;
        tap.activation(at, &y)?;
        Ok(y)
    }
}

impl Mlp {
    fn forward(&self, x: Tensor<3>, tap: &mut Tap, at: &str) -> Result<Tensor<3>, TraceError> {
        let x = self.c_fc.forward(x);
        tap.activation(&format!("{at}.c_fc"), &x)?;
        // PyTorch's nn.GELU(approximate="tanh"), as GPT-2.
        let x = gelu_approximate(x);
        tap.activation(&format!("{at}.gelu"), &x)?;
        let x = self.c_proj.forward(x);
        tap.activation(&format!("{at}.c_proj"), &x)?;
        tap.activation(at, &x)?;
        Ok(x)
    }
}

impl Block {
    fn new(s: &Sizes, device: &Device) -> Self {
        let d = s.d_model;
        Self {
            ln_1: LayerNormConfig::new(d).init(device),
            attn: Attention {
                c_attn: LinearConfig::new(d, 3 * d).init(device),
                c_proj: LinearConfig::new(d, d).init(device),
                heads: s.heads,
            },
            ln_2: LayerNormConfig::new(d).init(device),
            mlp: Mlp {
                c_fc: LinearConfig::new(d, 4 * d).init(device),
                c_proj: LinearConfig::new(4 * d, d).init(device),
            },
        }
    }

    fn forward(&self, x: Tensor<3>, tap: &mut Tap, at: &str) -> Result<Tensor<3>, TraceError> {
        let a = self.ln_1.forward(x.clone());
        tap.activation(&format!("{at}.ln_1"), &a)?;
        let x = x + self.attn.forward(a, tap, &format!("{at}.attn"))?;
        let m = self.ln_2.forward(x.clone());
        tap.activation(&format!("{at}.ln_2"), &m)?;
        let x = x + self.mlp.forward(m, tap, &format!("{at}.mlp"))?;
        tap.activation(at, &x)?;
        Ok(x)
    }
}

impl Gpt {
    fn new(s: &Sizes, device: &Device) -> Self {
        Self {
            wte: EmbeddingConfig::new(s.vocab, s.d_model).init(device),
            wpe: EmbeddingConfig::new(s.context, s.d_model).init(device),
            h: (0..s.layers).map(|_| Block::new(s, device)).collect(),
            ln_f: LayerNormConfig::new(s.d_model).init(device),
        }
    }

    /// Logits `[batch * seq, vocab]` of tokens `[batch, seq]`.
    fn forward(&self, tokens: Tensor<2, Int>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let [_, t] = tokens.dims();
        let device = tokens.device();
        let tok = self.wte.forward(tokens);
        tap.activation("wte", &tok)?;
        let positions = Tensor::<1, Int>::arange(0..t as i64, &device).unsqueeze::<2>();
        let pos = self.wpe.forward(positions);
        // PyTorch's `wpe(arange(t))` is fed 1-D positions: its output is `[seq, d_model]`.
        tap.activation("wpe", &pos.clone().squeeze_dim::<2>(0))?;
        let mut x = tok + pos;
        for (i, block) in self.h.iter().enumerate() {
            x = block.forward(x, &mut tap, &format!("h.{i}"))?;
        }
        let x = self.ln_f.forward(x);
        tap.activation("ln_f", &x)?;
        // The head is the token embedding (PyTorch's `lm_head.weight = wte.weight`).
        let logits = x.matmul(self.wte.weight.val().transpose().unsqueeze());
        tap.activation("lm_head", &logits)?;
        let [b, t, v] = logits.dims();
        Ok(logits.reshape([b * t, v]))
    }
}

fn main() {
    burnside_trace::run_port("gpt2-bench", run);
}

fn run(mut args: PortArgs) -> Result<(), Box<dyn Error>> {
    let heads = args
        .value("--heads")?
        .map(|h| h.parse::<usize>().map_err(|e| format!("--heads {h}: {e}")))
        .transpose()?;
    let no_record = args.flag("--no-record");
    if args.flag("--inference") {
        let how = Recording {
            record: !no_record,
            tap_free: args.flag("--tap-free"),
            taps_only: args.flag("--taps-only"),
        };
        args.finish()?;
        if how.tap_free && how.taps_only {
            return Err(UsageError("--tap-free and --taps-only exclude each other".into()).into());
        }
        return infer(&args, heads, how);
    }
    args.finish()?;
    let device = Device::default().autodiff();
    let init = InitFile::read(&args.init)?;
    let sizes = Sizes::of(&init, heads)?;
    let model = init.load_module(Gpt::new(&sizes, &device))?;
    let ce = CrossEntropyLossConfig::new().init(&device);
    let spec = OptimizerSpec::adam(LR);
    let forward_loss = |model: &Gpt, step: &mut Step<'_>| {
        let (x, y) = (step.int_input::<2>("x")?, step.int_input::<1>("y")?);
        let logits = model.forward(x, step.tap())?;
        let loss = ce.forward(logits.clone(), y);
        Ok::<_, Box<dyn Error>>((logits, loss))
    };
    if no_record {
        // The same loop as Training::run's, recording nothing.
        let mut model = model;
        let mut optim = spec.init();
        for k in 0..args.steps {
            let (_, loss) = forward_loss(&model, &mut Step::unrecorded(k, &init, &device))?;
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(LR, model, grads);
        }
        let last = args.steps.saturating_sub(1);
        let (_, loss) = forward_loss(&model, &mut Step::unrecorded(last, &init, &device))?;
        eprintln!(
            "loss after {} steps: {}",
            args.steps,
            loss.into_scalar::<f32>()
        );
        return Ok(());
    }
    let training = Training::new(spec).with_loss_fn("cross_entropy");
    training.run(&args, &init, &device, model, forward_loss)?;
    Ok(())
}

/// How the inference port records (`--no-record`, `--tap-free`, `--taps-only`).
struct Recording {
    record: bool,
    /// The forward's taps off: the layers are what graph capture records.
    tap_free: bool,
    /// `Inference::with_taps_only()`: the eager forward, the taps only.
    taps_only: bool,
}

/// The inference port: `args.steps` batches forward, recorded by `Inference` unless `--no-record`.
/// Each batch done is told by `step_done` (on stderr when `BURNSIDE_PROGRESS` is set), in the
/// plain loop as `Inference` tells it, so a benchmark can time the forward passes alone.
fn infer(args: &PortArgs, heads: Option<usize>, how: Recording) -> Result<(), Box<dyn Error>> {
    let device = Device::default();
    let init = InitFile::read(&args.init)?;
    let sizes = Sizes::of(&init, heads)?;
    let model = init.load_module(Gpt::new(&sizes, &device))?;
    if !how.record {
        step_done(0, args.steps);
        for k in 0..args.steps {
            let mut batch = Step::unrecorded(k, &init, &device);
            let x = batch.int_input::<2>("x")?;
            let logits = model.forward(x, batch.tap())?;
            let data = logits.into_data(); // the values computed and on the host, as recording has them
            eprintln!("batch {k}: logits {:?}", data.shape());
            step_done(k + 1, args.steps);
        }
        return Ok(());
    }
    let inference = if how.taps_only {
        Inference::new().with_taps_only()
    } else {
        Inference::new()
    };
    inference.run(args, &init, &device, &model, |model, batch| {
        let x = batch.int_input::<2>("x")?;
        let tap = if how.tap_free {
            Tap::off()
        } else {
            batch.tap()
        };
        Ok(model.forward(x, tap)?)
    })?;
    Ok(())
}

//! The burn port of `model.py` (a small ViT) for inference, checked by `burnside check`.
//!
//! Written by following only the README (tests/burn/test_user_port_vit.py). Porting bugs are switched on at run time with `--bug NAME` (after `--` in
//! `burnside check ... -- --checkpoint checkpoint/model.pt --bug NAME`); without `--bug` the port
//! is the correct one. Names: ln-eps, gelu-tanh, scale-dmodel, no-pos, last-token, stride4,
//! proj-no-transpose, plus the extra ones listed in BUGS below.

use std::sync::OnceLock;

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::store::{ModuleSnapshot, PytorchStore};
use burn::tensor::activation::{gelu, gelu_approximate, softmax};
use burn::tensor::{Device, Tensor, TensorData};
use burnside_trace::{Inference, InitFile, PortArgs, Tap, TraceError, UsageError};

const DIM: usize = 64;
const HEADS: usize = 4;
const HEAD_DIM: usize = DIM / HEADS;
const MLP: usize = 128;
const DEPTH: usize = 2;
const CLASSES: usize = 10;
const PATCH: usize = 8;
const TOKENS: usize = (32 / PATCH) * (32 / PATCH) + 1;

const BUGS: &[&str] = &[
    "ln-eps",            // a. LayerNorm epsilon left at burn's default 1e-5
    "gelu-tanh",         // b. GELU with the tanh approximation
    "scale-dmodel",      // c. attention scale 1/sqrt(d_model)
    "no-pos",            // d. position embedding not added
    "last-token",        // e. head reads the last token
    "stride4",           // f. patch conv with stride 4 (shapes do not fit)
    "stride4-fit",       // f'. stride 4, and the token sequence cut to 16 patches so shapes fit
    "proj-no-transpose", // g. blocks.0.attn.proj.weight read by hand, not transposed
    "qkv-order",         // h1. q, k, v taken in the order k, q, v from the packed qkv
    "heads-split",       // h2. heads split as [b, n, head_dim, heads] (wrong reshape)
    "no-softmax-max",    // h3. (noise) softmax written by hand, exp / sum, no max subtraction
    "pos-after-cls",     // h4. position embedding added before the cls token is prepended (pos[1..])
    "flatten-hw",        // h5. patches flattened as [b, w, h] (swap of h and w)
    "final-norm-skip",   // h6. final LayerNorm skipped
    "ln-eps-one",        // h7. only blocks.1.norm2 keeps burn's default epsilon
    "residual-norm",     // h8. residual added to the normed input instead of the block input
    "softmax-dim",       // h9. softmax over the query axis (dim 2) instead of the key axis
    "qkv-nobias",        // h10. qkv Linear built without bias (burn-store then drops the checkpoint's bias)
    "head-no-transpose", // h11. head.weight (non-square [10, 64]) read by hand, not transposed
    "conv-same",         // control: patch conv built with PaddingConfig2d::Same (TF-style: 0 padding here, so no change)
    "conv-pad1",         // h14. patch conv built with padding 1 (copied from a 3x3 conv; shapes still fit: 4x4 patches)
    "no-taps",           // modifier: tap no layer (Tap::off()), only the output is recorded; combine: --bug no-taps,gelu-tanh
    "tap-typo",          // h13. (not a numeric bug) the GELU tapped as `mlp.gelu` instead of PyTorch's `mlp.act`
];

static BUG: OnceLock<String> = OnceLock::new();

fn bug(name: &str) -> bool {
    BUG.get().map(|b| b.split(',').any(|b| b == name)).unwrap_or(false)
}

fn ln(device: &Device, name: &str) -> LayerNorm {
    let eps = if bug("ln-eps") || (bug("ln-eps-one") && name == "blocks.1.norm2") { 1e-5 } else { 1e-6 };
    LayerNormConfig::new(DIM).with_epsilon(eps).init(device)
}

#[derive(Module, Debug)]
struct Attention {
    qkv: Linear,
    proj: Linear,
}

impl Attention {
    fn new(device: &Device) -> Self {
        Self { qkv: LinearConfig::new(DIM, 3 * DIM).with_bias(!bug("qkv-nobias")).init(device), proj: LinearConfig::new(DIM, DIM).init(device) }
    }

    fn forward(&self, x: Tensor<3>, tap: &mut Tap, path: &str) -> Result<Tensor<3>, TraceError> {
        let [b, n, c] = x.dims();
        let qkv = self.qkv.forward(x);
        tap.activation(&format!("{path}.qkv"), &qkv)?;
        // [b, n, 3, heads, head_dim] -> [3, b, heads, n, head_dim]
        let qkv = if bug("heads-split") {
            qkv.reshape([b, n, 3, HEAD_DIM, HEADS]).swap_dims(3, 4)
        } else {
            qkv.reshape([b, n, 3, HEADS, HEAD_DIM])
        };
        let qkv = qkv.permute([2, 0, 3, 1, 4]);
        let take = |i: usize| qkv.clone().narrow(0, i, 1).squeeze_dim::<4>(0);
        let (q, k, v) = if bug("qkv-order") { (take(1), take(0), take(2)) } else { (take(0), take(1), take(2)) };
        let scale = if bug("scale-dmodel") { (DIM as f64).powf(-0.5) } else { (HEAD_DIM as f64).powf(-0.5) };
        let scores = q.matmul(k.swap_dims(2, 3)) * scale;
        let attn = if bug("no-softmax-max") {
            let e = scores.exp();
            let s = e.clone().sum_dim(3);
            e / s
        } else {
            softmax(scores, if bug("softmax-dim") { 2 } else { 3 })
        };
        let out = attn.matmul(v).swap_dims(1, 2).reshape([b, n, c]);
        let out = self.proj.forward(out);
        tap.activation(&format!("{path}.proj"), &out)?;
        tap.activation(path, &out)?;
        Ok(out)
    }
}

#[derive(Module, Debug)]
struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self { fc1: LinearConfig::new(DIM, MLP).init(device), fc2: LinearConfig::new(MLP, DIM).init(device) }
    }

    fn forward(&self, x: Tensor<3>, tap: &mut Tap, path: &str) -> Result<Tensor<3>, TraceError> {
        let x = self.fc1.forward(x);
        tap.activation(&format!("{path}.fc1"), &x)?;
        let x = if bug("gelu-tanh") { gelu_approximate(x) } else { gelu(x) };
        let act = if bug("tap-typo") { "gelu" } else { "act" };
        tap.activation(&format!("{path}.{act}"), &x)?;
        let x = self.fc2.forward(x);
        tap.activation(&format!("{path}.fc2"), &x)?;
        tap.activation(path, &x)?;
        Ok(x)
    }
}

#[derive(Module, Debug)]
struct Block {
    norm1: LayerNorm,
    attn: Attention,
    norm2: LayerNorm,
    mlp: Mlp,
}

impl Block {
    fn new(device: &Device, i: usize) -> Self {
        Self {
            norm1: ln(device, &format!("blocks.{i}.norm1")),
            attn: Attention::new(device),
            norm2: ln(device, &format!("blocks.{i}.norm2")),
            mlp: Mlp::new(device),
        }
    }

    fn forward(&self, x: Tensor<3>, tap: &mut Tap, path: &str) -> Result<Tensor<3>, TraceError> {
        let h = self.norm1.forward(x.clone());
        tap.activation(&format!("{path}.norm1"), &h)?;
        let a = self.attn.forward(h.clone(), tap, &format!("{path}.attn"))?;
        let x = if bug("residual-norm") { h + a } else { x + a };
        let h = self.norm2.forward(x.clone());
        tap.activation(&format!("{path}.norm2"), &h)?;
        let m = self.mlp.forward(h, tap, &format!("{path}.mlp"))?;
        let x = x + m;
        tap.activation(path, &x)?;
        Ok(x)
    }
}

#[derive(Module, Debug)]
struct Model {
    patch_embed: Conv2d,
    cls_token: Param<Tensor<3>>,
    #[cfg(not(feature = "misnamed"))]
    pos_embed: Param<Tensor<3>>,
    #[cfg(feature = "misnamed")]
    pos_embedding: Param<Tensor<3>>, // bug h12: field named otherwise than PyTorch's attribute
    blocks: Vec<Block>,
    norm: LayerNorm,
    head: Linear,
}

impl Model {
    fn new(device: &Device) -> Self {
        let stride = if bug("stride4") || bug("stride4-fit") { 4 } else { PATCH };
        Self {
            patch_embed: {
                let c = Conv2dConfig::new([3, DIM], [PATCH, PATCH]).with_stride([stride, stride]);
                let c = if bug("conv-same") { c.with_padding(burn::nn::PaddingConfig2d::Same) } else { c };
                let c = if bug("conv-pad1") { c.with_padding(burn::nn::PaddingConfig2d::Explicit(1, 1, 1, 1)) } else { c };
                c.init(device)
            },
            cls_token: Param::from_tensor(Tensor::zeros([1, 1, DIM], device)),
            #[cfg(not(feature = "misnamed"))]
            pos_embed: Param::from_tensor(Tensor::zeros([1, TOKENS, DIM], device)),
            #[cfg(feature = "misnamed")]
            pos_embedding: Param::from_tensor(Tensor::zeros([1, TOKENS, DIM], device)),
            blocks: (0..DEPTH).map(|i| Block::new(device, i)).collect(),
            norm: ln(device, "norm"),
            head: LinearConfig::new(DIM, CLASSES).init(device),
        }
    }

    fn pos(&self) -> Tensor<3> {
        #[cfg(not(feature = "misnamed"))]
        return self.pos_embed.val();
        #[cfg(feature = "misnamed")]
        return self.pos_embedding.val();
    }

    fn forward(&self, x: Tensor<4>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let x = self.patch_embed.forward(x);
        tap.activation("patch_embed", &x)?;
        let [b, c, h, w] = x.dims();
        let x = if bug("flatten-hw") { x.swap_dims(2, 3) } else { x };
        let mut x = x.reshape([b, c, h * w]).swap_dims(1, 2); // [b, patches, dim]
        if bug("stride4-fit") {
            x = x.narrow(1, 0, TOKENS - 1); // "make it fit": keep the first 16 patches
        }
        let cls = self.cls_token.val().expand([b, 1, DIM]);
        let mut x = if bug("pos-after-cls") {
            let pos = self.pos().narrow(1, 1, TOKENS - 1);
            Tensor::cat(vec![cls, x + pos], 1)
        } else {
            Tensor::cat(vec![cls, x], 1)
        };
        if !bug("no-pos") && !bug("pos-after-cls") {
            x = x + self.pos();
        }
        for (i, block) in self.blocks.iter().enumerate() {
            x = block.forward(x, &mut tap, &format!("blocks.{i}"))?;
        }
        let x = if bug("final-norm-skip") { x } else { self.norm.forward(x) };
        tap.activation("norm", &x)?;
        let n = x.dims()[1];
        let first = if bug("last-token") { n - 1 } else { 0 };
        let x = x.narrow(1, first, 1).squeeze_dim::<2>(1);
        let x = self.head.forward(x);
        tap.activation("head", &x)?;
        Ok(x)
    }
}

/// Bug g: a Linear weight read from the .pt by hand, PyTorch's [out, in] kept as it is.
fn load_weight_by_hand(model: Model, checkpoint: &str, device: &Device, name: &str) -> Result<Model, Box<dyn std::error::Error>> {
    let reader = burn::store::pytorch::PytorchReader::new(checkpoint)?;
    let t = reader.get(name).ok_or("no such tensor in the checkpoint")?;
    let bytes = t.read()?;
    let floats: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let w: Tensor<2> = Tensor::from_data(TensorData::new(floats, t.shape().to_vec()), device);
    let mut model = model;
    if name == "head.weight" {
        model.head.weight = Param::from_tensor(w); // bug: no .transpose()
    } else {
        model.blocks[0].attn.proj.weight = Param::from_tensor(w); // bug: no .transpose()
    }
    Ok(model)
}

fn main() {
    burnside_trace::run_port("user_vit", |mut args: PortArgs| {
        let checkpoint = args
            .value("--checkpoint")?
            .ok_or_else(|| UsageError("missing --checkpoint PATH (the .pt the model loads)".into()))?;
        if let Some(b) = args.value("--bug")? {
            if let Some(u) = b.split(',').find(|u| !BUGS.contains(u)) {
                let b = u;
                return Err(UsageError(format!("unknown --bug {b}; one of {} (several: comma-separated)", BUGS.join(", "))).into());
            }
            BUG.set(b).unwrap();
        }
        args.finish()?;
        let device = Device::default();
        let init = InitFile::read(&args.init)?;
        let mut model = Model::new(&device);
        // with feature `misnamed` the porter silences burn-store's complaint with allow_partial(true)
        model
            .load_from(&mut PytorchStore::from_file(&checkpoint).allow_partial(cfg!(feature = "misnamed")))
            .map_err(|e| format!("{checkpoint}: {e}"))?;
        if bug("proj-no-transpose") {
            model = load_weight_by_hand(model, &checkpoint, &device, "blocks.0.attn.proj.weight")?;
        }
        if bug("head-no-transpose") {
            model = load_weight_by_hand(model, &checkpoint, &device, "head.weight")?;
        }
        Inference::new().run(&args, &init, &device, &model, |model, batch| {
            let x = batch.float_input::<4>("x")?;
            let tap = if bug("no-taps") { Tap::off() } else { batch.tap() };
            Ok(model.forward(x, tap)?)
        })?;
        Ok(())
    });
}

//! The burn port of model.py's encoder for inference: the checkpoint PyTorch saved loaded with
//! burnside-trace's `load_pytorch_checkpoint` (burn-store's readers; `in_proj` cut into query, key and
//! value), each post-norm `nn.TransformerEncoderLayer` written out with burn's MultiHeadAttention, Linear,
//! LayerNorm and ReLU. `--bug ln-eps|gelu|qk-swapped|dropout-on|pytorch-store|pos-short` builds a porting slip in.

use burn::module::Module;
use burn::store::{ModuleSnapshot, PytorchStore};
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::{Dropout, DropoutConfig, Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::{gelu, relu};
use burn::tensor::{Device, Int, Tensor};
use burnside_trace::{Inference, InitFile, PortArgs, Tap, TraceError, UsageError};

const VOCAB: usize = 50;
const MAX_LEN: usize = 16;
const D_MODEL: usize = 32;
const HEADS: usize = 4;
const FF: usize = 64;
const CLASSES: usize = 5;
const DROPOUT: f64 = 0.1;

/// PyTorch's `nn.TransformerEncoderLayer(norm_first=False)`, its attributes as fields.
#[derive(Module, Debug)]
struct EncoderLayer {
    self_attn: MultiHeadAttention,
    linear1: Linear,
    dropout: Dropout,
    linear2: Linear,
    norm1: LayerNorm,
    norm2: LayerNorm,
    dropout1: Dropout,
    dropout2: Dropout,
}

impl EncoderLayer {
    fn new(device: &Device) -> Self {
        Self {
            // PyTorch's dropout 0.1 everywhere: off at inference, on a device without autodiff
            self_attn: MultiHeadAttentionConfig::new(D_MODEL, HEADS).with_dropout(DROPOUT).init(device),
            linear1: LinearConfig::new(D_MODEL, FF).init(device),
            dropout: DropoutConfig::new(DROPOUT).init(),
            linear2: LinearConfig::new(FF, D_MODEL).init(device),
            norm1: LayerNormConfig::new(D_MODEL).init(device),
            norm2: LayerNormConfig::new(D_MODEL).init(device),
            dropout1: DropoutConfig::new(DROPOUT).init(),
            dropout2: DropoutConfig::new(DROPOUT).init(),
        }
    }

    fn forward(&self, x: Tensor<3>, path: &str, tap: &mut Tap, gelu_act: bool) -> Result<Tensor<3>, TraceError> {
        let a = self.self_attn.forward(MhaInput::self_attn(x.clone())).context;
        tap.activation(&format!("{path}.self_attn"), &a)?;
        let a = self.dropout1.forward(a);
        tap.activation(&format!("{path}.dropout1"), &a)?;
        let x = self.norm1.forward(x + a);
        tap.activation(&format!("{path}.norm1"), &x)?;
        let h = self.linear1.forward(x.clone());
        tap.activation(&format!("{path}.linear1"), &h)?;
        let h = if gelu_act { gelu(h) } else { relu(h) };
        let h = self.dropout.forward(h);
        tap.activation(&format!("{path}.dropout"), &h)?;
        let h = self.linear2.forward(h);
        tap.activation(&format!("{path}.linear2"), &h)?;
        let h = self.dropout2.forward(h);
        tap.activation(&format!("{path}.dropout2"), &h)?;
        let x = self.norm2.forward(x + h);
        tap.activation(&format!("{path}.norm2"), &x)?;
        tap.activation(path, &x)?;
        Ok(x)
    }
}

#[derive(Module, Debug)]
struct Encoder {
    tok: Embedding,
    pos: Embedding,
    layers: Vec<EncoderLayer>,
    norm: LayerNorm,
    head: Linear,
}

impl Encoder {
    fn new(device: &Device, bug: Option<&str>) -> Self {
        let eps = if bug == Some("ln-eps") { 1e-6 } else { 1e-5 };
        Self {
            tok: EmbeddingConfig::new(VOCAB, D_MODEL).init(device),
            pos: EmbeddingConfig::new(MAX_LEN, D_MODEL).init(device),
            layers: (0..2).map(|_| EncoderLayer::new(device)).collect(),
            norm: LayerNormConfig::new(D_MODEL).with_epsilon(eps).init(device),
            head: LinearConfig::new(D_MODEL, CLASSES).init(device),
        }
    }

    fn forward(&self, ids: Tensor<2, Int>, mut tap: Tap, gelu_act: bool, short: bool) -> Result<Tensor<3>, TraceError> {
        let [batch, seq] = ids.dims();
        let x = self.tok.forward(ids.clone());
        tap.activation("tok", &x)?;
        // the slip `pos-short`: one position too few, so the sum below panics inside burn
        let len = if short { seq - 1 } else { seq };
        let positions = Tensor::<1, Int>::arange(0..len as i64, &ids.device()).unsqueeze::<2>();
        let p = self.pos.forward(positions).reshape([len, D_MODEL]);
        tap.activation("pos", &p)?;
        let mut x = x + p.unsqueeze::<3>().expand([batch, len, D_MODEL]);
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x, &format!("layers.{i}"), &mut tap, gelu_act)?;
        }
        let x = self.norm.forward(x);
        tap.activation("norm", &x)?;
        let x = self.head.forward(x);
        tap.activation("head", &x)?;
        Ok(x)
    }
}

fn main() {
    burnside_trace::run_port("user_encoder", |mut args: PortArgs| {
        let checkpoint = args
            .value("--checkpoint")?
            .ok_or_else(|| UsageError("missing --checkpoint PATH (the .pt the model loads)".into()))?;
        let bug = args.value("--bug")?;
        args.finish()?;
        let bug = bug.as_deref();
        // Inference: a device without autodiff, where burn's dropout is off, as model.eval() is. The slip
        // runs on an autodiff device, where every dropout at 0.1 (burn's MultiHeadAttention default too) draws masks.
        let device = if bug == Some("dropout-on") { Device::default().autodiff() } else { Device::default() };
        let init = InitFile::read(&args.init)?; // the batches PyTorch ran
        let mut model = if bug == Some("pytorch-store") {
            // the template's load, kept for a model with an nn.MultiheadAttention: burn-store cannot cut in_proj
            let mut model = Encoder::new(&device, bug);
            model
                .load_from(&mut PytorchStore::from_file(&checkpoint))
                .map_err(|e| format!("{checkpoint}: {e}"))?;
            model
        } else {
            burnside_trace::load_pytorch_checkpoint(Encoder::new(&device, bug), &checkpoint)?
        };
        if bug == Some("qk-swapped") {
            // a hand-written in_proj split that takes the key's rows for the query and the query's for the key
            let attn = &mut model.layers[0].self_attn;
            std::mem::swap(&mut attn.query, &mut attn.key);
        }
        let gelu_act = bug == Some("gelu");
        Inference::new().run(&args, &init, &device, &model, |model, batch| {
            let ids = batch.int_input::<2>("ids")?;
            Ok(model.forward(ids, batch.tap(), gelu_act, bug == Some("pos-short"))?)
        })?;
        Ok(())
    });
}

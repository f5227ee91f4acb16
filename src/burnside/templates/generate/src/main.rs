//! The burn port of a Hugging Face Llama (`model.py`) for greedy generation with a key/value cache, checked
//! by `burnside check` against `record_generate`'s trace: one `Inference` batch per step of the decode loop
//! (batch 0 the prompt, batch k the token step k - 1 chose, at its position), the cache kept in the closure
//! across batches and made anew at batch 0, PyTorch's tokens fed at every step (teacher-forced).
//!
//! Its dimensions come from the checkpoint folder's `config.json` (grouped-query attention, RoPE with
//! llama3's frequency scaling, an lm_head tied to the token embedding), so it runs a Llama checkpoint as
//! Hugging Face ships it; a bf16 checkpoint is widened to f32 on load by burn-store's `FloatCastAdapter`
//! (exact). Each layer is tapped under PyTorch's module path: graph capture cannot follow a cache from one
//! batch to the next, so the run is recorded with the taps (burnside says so on one line).

use std::cell::RefCell;
use std::path::Path;

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::store::{
    FloatCastAdapter, ModuleAdapter, ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore,
};
use burn::tensor::activation::{silu, softmax};
use burn::tensor::{Bool, DType, Device, Int, Tensor, TensorData};
use burnside_trace::{Inference, InitFile, PortArgs, Tap, TraceError, UsageError};
use serde_json::Value;

/// llama3's RoPE frequency scaling (`rope_type: llama3`), as transformers' `_compute_llama3_parameters`.
#[derive(Clone, Copy, Debug)]
struct Llama3Scaling {
    factor: f32,
    low_freq_factor: f32,
    high_freq_factor: f32,
    original_max_position_embeddings: f32,
}

/// The model's dimensions, read from Hugging Face's `config.json` (LlamaConfig's defaults where a key is absent).
#[derive(Clone, Debug)]
struct Config {
    vocab: usize,
    hidden: usize,
    intermediate: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    rms_eps: f64,
    rope_theta: f32,
    llama3: Option<Llama3Scaling>,
    tie_word_embeddings: bool,
}

impl Config {
    fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "{}: {e} (the checkpoint's folder needs Hugging Face's config.json)",
                path.display()
            )
        })?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        let bad = |key: &str| format!("{}: `{key}` is not a number", path.display());
        let size = |key: &str, default: usize| -> Result<usize, String> {
            match json.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| bad(key)),
            }
        };
        let float = |obj: &Value, key: &str, default: f64| -> Result<f64, String> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v.as_f64().ok_or_else(|| bad(key)),
            }
        };
        let hidden = size("hidden_size", 4096)?;
        let heads = size("num_attention_heads", 32)?;
        // transformers 5 writes `rope_parameters` (theta inside); the configs Hugging Face ships (transformers 4)
        // `rope_theta` and `rope_scaling`
        let rope = json
            .get("rope_parameters")
            .or_else(|| json.get("rope_scaling"))
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null);
        let rope_theta = match rope.get("rope_theta") {
            Some(_) => float(&rope, "rope_theta", 10000.0)?,
            None => float(&json, "rope_theta", 10000.0)?,
        };
        let kind = rope
            .get("rope_type")
            .or_else(|| rope.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let llama3 = match kind {
            "default" => None,
            "llama3" => Some(Llama3Scaling {
                factor: float(&rope, "factor", 8.0)? as f32,
                low_freq_factor: float(&rope, "low_freq_factor", 1.0)? as f32,
                high_freq_factor: float(&rope, "high_freq_factor", 4.0)? as f32,
                original_max_position_embeddings: float(
                    &rope,
                    "original_max_position_embeddings",
                    8192.0,
                )? as f32,
            }),
            other => {
                return Err(format!(
                    "{}: rope type `{other}` is not ported (default and llama3 are)",
                    path.display()
                ));
            }
        };
        Ok(Self {
            vocab: size("vocab_size", 32000)?,
            hidden,
            intermediate: size("intermediate_size", 11008)?,
            layers: size("num_hidden_layers", 32)?,
            heads,
            kv_heads: size("num_key_value_heads", heads)?,
            head_dim: size("head_dim", hidden / heads)?,
            rms_eps: float(&json, "rms_norm_eps", 1e-6)?,
            rope_theta: rope_theta as f32,
            llama3,
            tie_word_embeddings: json
                .get("tie_word_embeddings")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

#[derive(Module, Debug)]
struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
}

#[derive(Module, Debug)]
struct Mlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

#[derive(Module, Debug)]
struct DecoderLayer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

#[derive(Module, Debug)]
struct LlamaModel {
    embed_tokens: Embedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
}

#[derive(Module, Debug)]
struct Llama {
    model: LlamaModel,
    /// None when `tie_word_embeddings`: the logits are then read through `embed_tokens`' weight (Llama 3.2's
    /// checkpoints hold no `lm_head.weight`).
    lm_head: Option<Linear>,
}

fn linear(i: usize, o: usize, device: &Device) -> Linear {
    LinearConfig::new(i, o).with_bias(false).init(device)
}

impl Llama {
    /// The model with burn's lazy parameters (nothing is drawn before the checkpoint replaces it).
    fn new(cfg: &Config, device: &Device) -> Self {
        // the config's epsilon: RmsNormConfig's default is 1e-5, Llama's 1e-6 or 1e-5
        let rms = || {
            RmsNormConfig::new(cfg.hidden)
                .with_epsilon(cfg.rms_eps)
                .init(device)
        };
        let (q_dim, kv_dim) = (cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim);
        let layers = (0..cfg.layers)
            .map(|_| DecoderLayer {
                input_layernorm: rms(),
                self_attn: Attention {
                    q_proj: linear(cfg.hidden, q_dim, device),
                    k_proj: linear(cfg.hidden, kv_dim, device),
                    v_proj: linear(cfg.hidden, kv_dim, device),
                    o_proj: linear(q_dim, cfg.hidden, device),
                },
                post_attention_layernorm: rms(),
                mlp: Mlp {
                    gate_proj: linear(cfg.hidden, cfg.intermediate, device),
                    up_proj: linear(cfg.hidden, cfg.intermediate, device),
                    down_proj: linear(cfg.intermediate, cfg.hidden, device),
                },
            })
            .collect();
        Self {
            model: LlamaModel {
                embed_tokens: EmbeddingConfig::new(cfg.vocab, cfg.hidden).init(device),
                layers,
                norm: rms(),
            },
            lm_head: (!cfg.tie_word_embeddings).then(|| linear(cfg.hidden, cfg.vocab, device)),
        }
    }
}

/// RoPE's inverse frequencies in f32, as transformers computes them (`_compute_default_rope_parameters`, then
/// `_compute_llama3_parameters` for llama3's scaling), op by op in the same order.
fn inv_freq(cfg: &Config) -> Vec<f32> {
    let theta = cfg.rope_theta;
    let d = cfg.head_dim;
    // 1.0 / base ** (arange(0, d, 2) / d): torch's `1.0 / t` is reciprocal(t) * 1.0
    let base: Vec<f32> = (0..d / 2)
        .map(|i| 1.0 / theta.powf((2 * i) as f32 / d as f32))
        .collect();
    let Some(s) = cfg.llama3 else {
        return base;
    };
    let low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    let high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    base.into_iter()
        .map(|f| {
            // `2 * math.pi / inv_freq` and `old_context_len / wavelen` are torch's rdiv: reciprocal, then the
            // product with the scalar taken in f32
            let wavelen = (1.0 / f) * (2.0 * std::f64::consts::PI) as f32;
            let scaled = if wavelen > low_freq_wavelen {
                f / s.factor
            } else {
                f
            };
            let smooth = ((1.0 / wavelen) * s.original_max_position_embeddings - s.low_freq_factor)
                / (s.high_freq_factor - s.low_freq_factor);
            let smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
            let medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
            if medium { smoothed } else { scaled }
        })
        .collect()
}

/// Per layer: keys (after RoPE) and values, [batch, kv_heads, past, head_dim], before repeat_kv.
type Cache = Vec<Option<(Tensor<4>, Tensor<4>)>>;

/// Hugging Face's rotate_half: cat(-x2, x1) of the two halves of the last axis.
fn rotate_half(x: Tensor<4>) -> Tensor<4> {
    let half = x.dims()[3] / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.narrow(3, half, half);
    Tensor::cat(vec![x2.neg(), x1], 3)
}

/// [b, kv, s, d] -> [b, kv * n_rep, s, d], as HF's repeat_kv (each kv head repeated in place).
fn repeat_kv(x: Tensor<4>, n_rep: usize) -> Tensor<4> {
    let [b, kv, s, d] = x.dims();
    // not `x.repeat_dim(1, n_rep)`, which tiles them (kv0, kv1, kv0, kv1)
    x.unsqueeze_dim::<5>(2)
        .expand([b, kv, n_rep, s, d])
        .reshape([b, kv * n_rep, s, d])
}

fn forward(
    model: &Llama,
    cfg: &Config,
    input_ids: Tensor<2, Int>,
    position_ids: Tensor<2, Int>,
    cache: &mut Cache,
    tap: &mut Tap,
) -> Result<Tensor<3>, TraceError> {
    let device = input_ids.device();
    let [b, s] = input_ids.dims();
    let past = cache[0].as_ref().map(|(k, _)| k.dims()[2]).unwrap_or(0);

    let (heads, kv_heads, head_dim) = (cfg.heads, cfg.kv_heads, cfg.head_dim);

    // RoPE tables, as LlamaRotaryEmbedding: freqs = pos * inv_freq.
    let inv_freq =
        Tensor::<1>::from_data(TensorData::new(inv_freq(cfg), [head_dim / 2]), &device)
            .reshape([1, 1, head_dim / 2]);
    // the batch's positions: a decode step's count on from the cache's length, as PyTorch's loop gives them
    let freqs = position_ids.float().reshape([b, s, 1]) * inv_freq; // [b, s, d/2]
    // rotate_half's layout (f0, f1, .., f0, f1, ..); burn's RotaryEncoding rotates interleaved pairs instead
    let emb = Tensor::cat(vec![freqs.clone(), freqs], 2); // [b, s, d]
    let cos_table = emb.clone().cos();
    tap.activation("model.rotary_emb", &cos_table)?; // LlamaRotaryEmbedding returns (cos, sin)
    let cos = cos_table.unsqueeze_dim::<4>(1); // [b, 1, s, d]
    let sin = emb.sin().unsqueeze_dim::<4>(1);
    let rope = |x: Tensor<4>| -> Tensor<4> { x.clone() * cos.clone() + rotate_half(x) * sin.clone() };

    let mut h = model.model.embed_tokens.forward(input_ids);
    tap.activation("model.embed_tokens", &h)?;
    let scaling = (head_dim as f64).powf(-0.5);
    for (i, layer) in model.model.layers.iter().enumerate() {
        let p = format!("model.layers.{i}");
        let residual = h.clone();
        let x = layer.input_layernorm.forward(h);
        tap.activation(&format!("{p}.input_layernorm"), &x)?;
        let attn = &layer.self_attn;
        let q = attn.q_proj.forward(x.clone());
        tap.activation(&format!("{p}.self_attn.q_proj"), &q)?;
        let k = attn.k_proj.forward(x.clone());
        tap.activation(&format!("{p}.self_attn.k_proj"), &k)?;
        let v = attn.v_proj.forward(x);
        tap.activation(&format!("{p}.self_attn.v_proj"), &v)?;
        let q = q.reshape([b, s, heads, head_dim]).swap_dims(1, 2);
        let k = k.reshape([b, s, kv_heads, head_dim]).swap_dims(1, 2);
        let v = v.reshape([b, s, kv_heads, head_dim]).swap_dims(1, 2);
        let q = rope(q);
        let k = rope(k);
        // the cache holds every step's keys and values so far: this step's appended, and stored back
        let (k_all, v_all) = match cache[i].take() {
            None => (k, v),
            Some((ck, cv)) => (Tensor::cat(vec![ck, k], 2), Tensor::cat(vec![cv, v], 2)),
        };
        cache[i] = Some((k_all.clone(), v_all.clone()));
        let kv_len = k_all.dims()[2];
        let k_rep = repeat_kv(k_all, heads / kv_heads);
        let v_rep = repeat_kv(v_all, heads / kv_heads);
        let mut scores = q.matmul(k_rep.swap_dims(2, 3)).mul_scalar(scaling); // [b, h, s, kv_len]
        // causal: query t (at position past + t) sees keys 0..=past + t
        // burn's tril_mask(shape, offset) is true (filled) where key j > query i + offset
        // offset by the cache's length; a one-token step sees the whole cache and needs none
        if s > 1 {
            let mask = Tensor::<2, Bool>::tril_mask([s, kv_len], past as i64, &device)
                .reshape([1, 1, s, kv_len])
                .expand([b, heads, s, kv_len]);
            scores = scores.mask_fill(mask, f32::NEG_INFINITY);
        }
        let weights = softmax(scores, 3);
        let ctx = weights
            .matmul(v_rep)
            .swap_dims(1, 2)
            .reshape([b, s, heads * head_dim]);
        let o = attn.o_proj.forward(ctx);
        tap.activation(&format!("{p}.self_attn.o_proj"), &o)?;
        tap.activation(&format!("{p}.self_attn"), &o)?;
        let h1 = residual + o;

        let residual = h1.clone();
        let x = layer.post_attention_layernorm.forward(h1);
        tap.activation(&format!("{p}.post_attention_layernorm"), &x)?;
        let mlp = &layer.mlp;
        let gate = mlp.gate_proj.forward(x.clone());
        tap.activation(&format!("{p}.mlp.gate_proj"), &gate)?;
        let act = silu(gate);
        tap.activation(&format!("{p}.mlp.act_fn"), &act)?;
        let up = mlp.up_proj.forward(x);
        tap.activation(&format!("{p}.mlp.up_proj"), &up)?;
        let x = mlp.down_proj.forward(act * up);
        tap.activation(&format!("{p}.mlp.down_proj"), &x)?;
        tap.activation(&format!("{p}.mlp"), &x)?;
        h = residual + x;
        tap.activation(&p, &h)?;
    }
    let h = model.model.norm.forward(h);
    tap.activation("model.norm", &h)?;
    let logits = match &model.lm_head {
        Some(lm_head) => lm_head.forward(h),
        // tied: F.linear(h, embed_tokens.weight), the [vocab, hidden] table read transposed
        None => h.matmul(
            model
                .model
                .embed_tokens
                .weight
                .val()
                .transpose()
                .unsqueeze_dim::<3>(0),
        ),
    };
    tap.activation("lm_head", &logits)?;
    Ok(logits)
}

fn main() {
    burnside_trace::run_port("{crate}", |mut args: PortArgs| {
        let checkpoint = args.value("--checkpoint")?.ok_or_else(|| {
            UsageError("missing --checkpoint PATH (the model.safetensors)".into())
        })?;
        args.finish()?;
        let device = Device::default();
        let init = InitFile::read(&args.init)?;
        let config = Path::new(&checkpoint).with_file_name("config.json");
        let cfg = Config::read(&config)?;
        let layers = cfg.layers;
        let mut model = Llama::new(&cfg, &device);
        // PyTorch's names and [out, in] layout, every float tensor widened to the f32 model's dtype (a bf16
        // checkpoint would otherwise load as bf16 parameters: burn-store keeps the file's dtype), exactly
        let adapter = PyTorchToBurnAdapter.chain(FloatCastAdapter::to(DType::F32));
        let mut store = SafetensorsStore::from_file(&checkpoint).with_from_adapter(adapter);
        model
            .load_from(&mut store)
            .map_err(|e| format!("{checkpoint}: {e}"))?;
        // the decode loop's cache, kept across Inference's batches (one batch per step)
        let cache: RefCell<Cache> = RefCell::new(vec![None; layers]);
        Inference::new().run(&args, &init, &device, &model, |model, batch| {
            let input_ids = batch.int_input::<2>("input_ids")?;
            let position_ids = batch.int_input::<2>("position_ids")?;
            let mut cache = cache.borrow_mut();
            if batch.index() == 0 {
                *cache = vec![None; layers]; // the prompt: a new cache
            }
            let mut tap = batch.tap();
            Ok(forward(model, &cfg, input_ids, position_ids, &mut cache, &mut tap)?)
        })?;
        Ok(())
    });
}

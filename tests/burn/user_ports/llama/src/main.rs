//! The burn port of a tiny Hugging Face Llama (`model.py`) for greedy generation with a KV cache,
//! checked by `burnside check` against `record_generate`'s trace (one Inference batch per decode step).
//!
//! `--bug NAME` builds a porting slip in: pos-restart, rope-interleaved, rope-theta, rms-eps, gqa-order,
//! no-cache-append, mask-reuse; and two of loading a bf16 checkpoint into this f32 model: via-f16 (the
//! weights cast through f16 on their way to f32) and no-cast (burn-store's load alone, which keeps a
//! bf16 tensor bf16).

use std::cell::RefCell;

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::store::{
    FloatCastAdapter, ModuleAdapter, ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore,
};
use burn::tensor::activation::{silu, softmax};
use burn::tensor::{Bool, DType, Device, Int, Tensor, TensorData};
use burnside_trace::{Inference, InitFile, PortArgs, Tap, TraceError, UsageError};

const VOCAB: usize = 64;
const HIDDEN: usize = 32;
const INTERMEDIATE: usize = 64;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const ROPE_THETA: f32 = 500000.0;
const RMS_EPS: f64 = 1e-6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    None,
    PosRestart,
    RopeInterleaved,
    RopeTheta,
    RmsEps,
    GqaOrder,
    NoCacheAppend,
    MaskReuse,
    ViaF16,
    NoCast,
}

impl Bug {
    fn parse(name: Option<String>) -> Result<Self, UsageError> {
        Ok(match name.as_deref() {
            None => Bug::None,
            Some("pos-restart") => Bug::PosRestart,
            Some("rope-interleaved") => Bug::RopeInterleaved,
            Some("rope-theta") => Bug::RopeTheta,
            Some("rms-eps") => Bug::RmsEps,
            Some("gqa-order") => Bug::GqaOrder,
            Some("no-cache-append") => Bug::NoCacheAppend,
            Some("mask-reuse") => Bug::MaskReuse,
            Some("via-f16") => Bug::ViaF16,
            Some("no-cast") => Bug::NoCast,
            Some(other) => return Err(UsageError(format!("unknown --bug {other}"))),
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
    lm_head: Linear,
}

fn linear(i: usize, o: usize, device: &Device) -> Linear {
    LinearConfig::new(i, o).with_bias(false).init(device)
}

fn rms(eps: f64, device: &Device) -> RmsNorm {
    RmsNormConfig::new(HIDDEN).with_epsilon(eps).init(device)
}

impl Llama {
    fn new(device: &Device, bug: Bug) -> Self {
        let eps = if bug == Bug::RmsEps { 1e-5 } else { RMS_EPS };
        let layers = (0..LAYERS)
            .map(|_| DecoderLayer {
                input_layernorm: rms(eps, device),
                self_attn: Attention {
                    q_proj: linear(HIDDEN, HEADS * HEAD_DIM, device),
                    k_proj: linear(HIDDEN, KV_HEADS * HEAD_DIM, device),
                    v_proj: linear(HIDDEN, KV_HEADS * HEAD_DIM, device),
                    o_proj: linear(HEADS * HEAD_DIM, HIDDEN, device),
                },
                post_attention_layernorm: rms(eps, device),
                mlp: Mlp {
                    gate_proj: linear(HIDDEN, INTERMEDIATE, device),
                    up_proj: linear(HIDDEN, INTERMEDIATE, device),
                    down_proj: linear(INTERMEDIATE, HIDDEN, device),
                },
            })
            .collect();
        Self {
            model: LlamaModel {
                embed_tokens: EmbeddingConfig::new(VOCAB, HIDDEN).init(device),
                layers,
                norm: rms(eps, device),
            },
            lm_head: linear(HIDDEN, VOCAB, device),
        }
    }
}

/// Per layer: keys (after RoPE) and values, [batch, kv_heads, past, head_dim], before repeat_kv.
type Cache = Vec<Option<(Tensor<4>, Tensor<4>)>>;

/// Hugging Face's rotate_half: cat(-x2, x1) of the two halves of the last axis.
fn rotate_half(x: Tensor<4>) -> Tensor<4> {
    let half = HEAD_DIM / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.narrow(3, half, half);
    Tensor::cat(vec![x2.neg(), x1], 3)
}

/// The interleaved form's partner: (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]) (GPT-J / burn's RotaryEncoding).
fn rotate_pairs(x: Tensor<4>) -> Tensor<4> {
    let [b, h, s, d] = x.dims();
    let pairs = x.reshape([b, h, s, d / 2, 2]);
    let even = pairs.clone().narrow(4, 0, 1);
    let odd = pairs.narrow(4, 1, 1);
    Tensor::cat(vec![odd.neg(), even], 4).reshape([b, h, s, d])
}

/// [b, kv, s, d] -> [b, kv * n_rep, s, d], as HF's repeat_kv (each kv head repeated in place).
fn repeat_kv(x: Tensor<4>, n_rep: usize, bug: Bug) -> Tensor<4> {
    let [b, kv, s, d] = x.dims();
    if bug == Bug::GqaOrder {
        // tile: kv0, kv1, kv0, kv1
        return x.repeat_dim(1, n_rep);
    }
    x.unsqueeze_dim::<5>(2)
        .expand([b, kv, n_rep, s, d])
        .reshape([b, kv * n_rep, s, d])
}

fn forward(
    model: &Llama,
    input_ids: Tensor<2, Int>,
    position_ids: Tensor<2, Int>,
    cache: &mut Cache,
    bug: Bug,
    tap: &mut Tap,
) -> Result<Tensor<3>, TraceError> {
    let device = input_ids.device();
    let [b, s] = input_ids.dims();
    let past = cache[0].as_ref().map(|(k, _)| k.dims()[2]).unwrap_or(0);

    // RoPE tables, as LlamaRotaryEmbedding: inv_freq = 1 / theta^(2i/d), freqs = pos * inv_freq.
    let theta = if bug == Bug::RopeTheta { 10000.0f32 } else { ROPE_THETA };
    let inv_freq: Vec<f32> = (0..HEAD_DIM / 2)
        .map(|i| 1.0 / theta.powf((2 * i) as f32 / HEAD_DIM as f32))
        .collect();
    let inv_freq = Tensor::<1>::from_data(TensorData::new(inv_freq, [HEAD_DIM / 2]), &device)
        .reshape([1, 1, HEAD_DIM / 2]);
    let positions = if bug == Bug::PosRestart {
        Tensor::<1, Int>::arange(0..s as i64, &device).reshape([1, s])
    } else {
        position_ids
    };
    let freqs = positions.float().reshape([b, s, 1]) * inv_freq; // [b, s, d/2]
    let emb = if bug == Bug::RopeInterleaved {
        // GPT-J / burn RotaryEncoding layout: each frequency twice in a row (f0, f0, f1, f1, ...)
        freqs.unsqueeze_dim::<4>(3).repeat_dim(3, 2).reshape([b, s, HEAD_DIM])
    } else {
        Tensor::cat(vec![freqs.clone(), freqs], 2) // [b, s, d]: (f0, f1, .., f0, f1, ..)
    };
    let cos_table = emb.clone().cos();
    tap.activation("model.rotary_emb", &cos_table)?; // LlamaRotaryEmbedding returns (cos, sin)
    let cos = cos_table.unsqueeze_dim::<4>(1); // [b, 1, s, d]
    let sin = emb.sin().unsqueeze_dim::<4>(1);
    let rope = |x: Tensor<4>| -> Tensor<4> {
        if bug == Bug::RopeInterleaved {
            x.clone() * cos.clone() + rotate_pairs(x) * sin.clone()
        } else {
            x.clone() * cos.clone() + rotate_half(x) * sin.clone()
        }
    };

    let mut h = model.model.embed_tokens.forward(input_ids);
    tap.activation("model.embed_tokens", &h)?;
    let scaling = (HEAD_DIM as f64).powf(-0.5);
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
        let q = q.reshape([b, s, HEADS, HEAD_DIM]).swap_dims(1, 2);
        let k = k.reshape([b, s, KV_HEADS, HEAD_DIM]).swap_dims(1, 2);
        let v = v.reshape([b, s, KV_HEADS, HEAD_DIM]).swap_dims(1, 2);
        let q = rope(q);
        let k = rope(k);
        let (k_all, v_all) = match cache[i].take() {
            None => (k, v),
            Some((ck, cv)) => {
                let k_all = Tensor::cat(vec![ck.clone(), k], 2);
                let v_all = Tensor::cat(vec![cv.clone(), v], 2);
                if bug == Bug::NoCacheAppend {
                    // the slip: the cache is never updated after the prompt
                    cache[i] = Some((ck, cv));
                    (k_all, v_all)
                } else {
                    (k_all, v_all)
                }
            }
        };
        if cache[i].is_none() {
            cache[i] = Some((k_all.clone(), v_all.clone()));
        }
        let kv_len = k_all.dims()[2];
        let k_rep = repeat_kv(k_all, HEADS / KV_HEADS, bug);
        let v_rep = repeat_kv(v_all, HEADS / KV_HEADS, bug);
        let mut scores = q.matmul(k_rep.swap_dims(2, 3)).mul_scalar(scaling); // [b, h, s, kv_len]
        // causal: query t (at position past + t) sees keys 0..=past + t
        // burn's tril_mask(shape, offset) is true (filled) where key j > query i + offset
        let offset = if bug == Bug::MaskReuse { 0 } else { past as i64 };
        if s > 1 || bug == Bug::MaskReuse {
            let mask = Tensor::<2, Bool>::tril_mask([s, kv_len], offset, &device)
                .reshape([1, 1, s, kv_len])
                .expand([b, HEADS, s, kv_len]);
            scores = scores.mask_fill(mask, f32::NEG_INFINITY);
        }
        let weights = softmax(scores, 3);
        let ctx = weights.matmul(v_rep).swap_dims(1, 2).reshape([b, s, HEADS * HEAD_DIM]);
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
    let logits = model.lm_head.forward(h);
    tap.activation("lm_head", &logits)?;
    Ok(logits)
}

fn main() {
    burnside_trace::run_port("user_llama", |mut args: PortArgs| {
        let checkpoint = args
            .value("--checkpoint")?
            .ok_or_else(|| UsageError("missing --checkpoint PATH (the model.safetensors)".into()))?;
        let bug = Bug::parse(args.value("--bug")?)?;
        let taps_only = args.flag("--taps-only");
        let no_taps = args.flag("--no-taps");
        // keep the cache on the host between batches (into_data / from_data) instead of as tensors
        let host_cache = args.flag("--host-cache");
        args.finish()?;
        let device = Device::default();
        let init = InitFile::read(&args.init)?;
        let mut model = Llama::new(&device, bug);
        // The model is f32: a checkpoint's other float dtype (HF's bf16) is cast to f32 as it loads, exactly.
        let store = SafetensorsStore::from_file(&checkpoint);
        let mut store = match bug {
            Bug::NoCast => store.with_from_adapter(PyTorchToBurnAdapter),
            Bug::ViaF16 => store.with_from_adapter(
                PyTorchToBurnAdapter
                    .chain(FloatCastAdapter::to(DType::F16))
                    .chain(FloatCastAdapter::to(DType::F32)),
            ),
            _ => store.with_from_adapter(
                PyTorchToBurnAdapter.chain(FloatCastAdapter::to(DType::F32)),
            ),
        };
        model
            .load_from(&mut store)
            .map_err(|e| format!("{checkpoint}: {e}"))?;
        let cache: RefCell<Cache> = RefCell::new(vec![None; LAYERS]);
        let host: RefCell<Vec<Option<(TensorData, TensorData)>>> = RefCell::new(vec![None; LAYERS]);
        let inference = if taps_only { Inference::new().with_taps_only() } else { Inference::new() };
        inference.run(&args, &init, &device, &model, |model, batch| {
            let input_ids = batch.int_input::<2>("input_ids")?;
            let position_ids = batch.int_input::<2>("position_ids")?;
            let mut cache = cache.borrow_mut();
            if batch.index() == 0 {
                *cache = vec![None; LAYERS];
            }
            let first = batch.index() == 0;
            let mut tap = if no_taps { Tap::off() } else { batch.tap() };
            if host_cache {
                let mut host = host.borrow_mut();
                if first {
                    *host = vec![None; LAYERS];
                }
                let dev = input_ids.device();
                *cache = host
                    .iter()
                    .map(|e| {
                        e.as_ref().map(|(k, v)| {
                            (Tensor::<4>::from_data(k.clone(), &dev), Tensor::<4>::from_data(v.clone(), &dev))
                        })
                    })
                    .collect();
                let logits = forward(model, input_ids, position_ids, &mut cache, bug, &mut tap)?;
                *host = cache
                    .iter()
                    .map(|e| e.as_ref().map(|(k, v)| (k.clone().into_data(), v.clone().into_data())))
                    .collect();
                return Ok(logits);
            }
            Ok(forward(model, input_ids, position_ids, &mut cache, bug, &mut tap)?)
        })?;
        Ok(())
    });
}

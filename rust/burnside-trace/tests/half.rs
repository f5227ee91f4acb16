//! Half precision (BF16, F16) in init files and traces: a half model's init file read word for
//! word, loaded into an f32 module widened exactly (and into the dtype the module holds), a bf16
//! burn tensor recorded as its raw words with statistics hashing them, and hostile half headers
//! refused in one line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod common;
use common::{fixture, tiny};

use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::{DType, Device, bf16, f16};
use burnside_trace::{
    HostDType, HostTensor, InitFile, OptimizerSpec, PortArgs, SafetensorsFile, Statistics,
    TraceRecorder, Training,
};

/// Half words that catch a wrong conversion: +-0, the smallest and largest subnormals, the
/// largest finite, infinity, a NaN with a payload (six of them: `fc.weight` is [2, 3]).
const BF16_WORDS: [u16; 6] = [0x8000, 0x0001, 0x007F, 0x7F7F, 0xFF80, 0x7FC1];
const F16_WORDS: [u16; 6] = [0x8000, 0x0001, 0x03FF, 0x7BFF, 0xFC00, 0x7E01];

fn st_dtype(dtype: HostDType) -> safetensors::Dtype {
    match dtype {
        HostDType::F32 => safetensors::Dtype::F32,
        HostDType::F64 => safetensors::Dtype::F64,
        HostDType::I64 => safetensors::Dtype::I64,
        HostDType::BF16 => safetensors::Dtype::BF16,
        HostDType::F16 => safetensors::Dtype::F16,
    }
}

fn words_bytes(words: &[u16]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `tiny_init.safetensors` with its float tensors in `dtype`: `fc.weight` the `weight` words,
/// the others rounded from their f32 values.
fn half_init(name: &str, dtype: HostDType, weight: Option<&[u16]>) -> PathBuf {
    let source = SafetensorsFile::read(fixture("tiny_init.safetensors")).unwrap();
    let path = common::scratch("half", name);
    let mut held: Vec<(String, HostTensor)> = Vec::new();
    for (key, t) in &source.tensors {
        let tensor = match (t.dtype, key.as_str(), weight) {
            (HostDType::F32, "params.fc.weight", Some(words)) => HostTensor {
                dtype,
                shape: t.shape.clone(),
                bytes: words_bytes(words),
            },
            (HostDType::F32, _, _) => {
                let values = t.to_f32().unwrap();
                let words: Vec<u16> = match dtype {
                    HostDType::BF16 => values
                        .iter()
                        .map(|v| bf16::from_f32(*v).to_bits())
                        .collect(),
                    _ => values.iter().map(|v| f16::from_f32(*v).to_bits()).collect(),
                };
                HostTensor {
                    dtype,
                    shape: t.shape.clone(),
                    bytes: words_bytes(&words),
                }
            }
            _ => t.clone(),
        };
        held.push((key.clone(), tensor));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = held
        .iter()
        .map(|(key, t)| {
            let view =
                safetensors::tensor::TensorView::new(st_dtype(t.dtype), t.shape.clone(), &t.bytes)
                    .unwrap();
            (key.clone(), view)
        })
        .collect();
    let metadata: HashMap<String, String> = source.metadata.clone().into_iter().collect();
    safetensors::tensor::serialize_to_file(views, Some(metadata), &path).unwrap();
    path
}

/// The f32 bits of half `words` widened by the `half` crate.
fn widened_bits(dtype: HostDType, words: &[u16]) -> Vec<u32> {
    words
        .iter()
        .map(|&w| match dtype {
            HostDType::BF16 => bf16::from_bits(w).to_f32().to_bits(),
            _ => f16::from_bits(w).to_f32().to_bits(),
        })
        .collect()
}

fn f32_bits(tensor: &HostTensor) -> Vec<u32> {
    assert_eq!(tensor.dtype, HostDType::F32);
    tensor
        .to_f32()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn a_half_init_file_reads_word_for_word_and_loads_into_an_f32_module_widened_exactly() {
    for (dtype, words, tag) in [
        (HostDType::BF16, BF16_WORDS, "bf16"),
        (HostDType::F16, F16_WORDS, "f16"),
    ] {
        let path = half_init(&format!("{tag}-init.safetensors"), dtype, Some(&words));
        let init = InitFile::read(&path).unwrap();
        let weight = init.param("fc.weight").unwrap();
        assert_eq!(
            (weight.dtype, weight.bytes.clone()),
            (dtype, words_bytes(&words)),
            "{tag}"
        );
        let device = Device::default().autodiff();
        let model = init.load_module(tiny(&device)).unwrap();
        assert_eq!(
            model.fc.weight.val().dtype(),
            DType::F32,
            "{tag}: the f32 module stays f32"
        );
        // read back by the recorder, in PyTorch name and layout: each word widened exactly
        let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
        recorder.params_before(0, &model).unwrap();
        let recorded = &recorder.tensors()["step0.params_before.fc.weight"];
        assert_eq!(f32_bits(recorded), widened_bits(dtype, &words), "{tag}");
        let bias = init.param("fc.bias").unwrap();
        let bias_words: Vec<u16> = bias
            .bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(
            f32_bits(&recorder.tensors()["step0.params_before.fc.bias"]),
            widened_bits(dtype, &bias_words)
        );
        // a half input is read as the device's float dtype (f32), widened exactly
        let x = init.input_at(0, "x").unwrap();
        assert_eq!(x.dtype, dtype);
        let x_words: Vec<u16> = x
            .bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let read = init
            .float_input_at::<2>(0, "x", &device)
            .unwrap()
            .into_data();
        assert_eq!(read.dtype(), DType::F32);
        let read: Vec<u32> = read
            .try_to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(read, widened_bits(dtype, &x_words), "{tag}");
        // HostTensor's own widening agrees with burn's
        assert_eq!(
            f32_bits(&weight.clone().widened()),
            widened_bits(dtype, &words)
        );
    }
}

/// Three SGD steps of the tiny model from `init`, its layer tapped cast to `dtype`.
fn train_tapping(init: &Path, out: &Path, dtype: DType) {
    let line = format!("--init {} -o {} --steps 3", init.display(), out.display());
    let args = PortArgs::parse(line.split_whitespace().map(String::from)).unwrap();
    let device = Device::default().autodiff();
    let init = InitFile::read(init).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let model = init.load_module(tiny(&device)).unwrap();
    Training::new(OptimizerSpec::sgd(0.1))
        .run(&args, &init, &device, model, |model, step| {
            let x = step.float_input::<2>("x")?;
            let logits = model.fc.forward(x);
            step.tap().activation("fc", &logits.clone().cast(dtype))?;
            let loss = ce.forward(logits.clone(), step.int_input::<1>("y")?);
            Ok((logits, loss))
        })
        .unwrap();
}

#[test]
fn a_half_tensor_is_recorded_as_its_words_and_its_statistics_hash_them() {
    let init = half_init("bf16-train-init.safetensors", HostDType::BF16, None);
    // `BURNSIDE_HALF_TRACES` (a folder) keeps the traces where a Python test reads them back
    let folder = std::env::var_os("BURNSIDE_HALF_TRACES").map(PathBuf::from);
    for (dtype, host, tag) in [
        (DType::BF16, HostDType::BF16, "bf16"),
        (DType::F16, HostDType::F16, "f16"),
    ] {
        let name = format!("{tag}.burn.safetensors");
        let out = folder
            .as_ref()
            .map_or_else(|| common::scratch("half", &name), |f| f.join(&name));
        train_tapping(&init, &out, dtype);
        let trace = SafetensorsFile::read(&out).unwrap();
        for k in 0..3 {
            let tapped = &trace.tensors[&format!("step{k}.activations.fc")];
            let logits = &trace.tensors[&format!("step{k}.logits")];
            assert_eq!(tapped.dtype, host, "{tag}");
            assert_eq!(logits.dtype, HostDType::F32);
            let values = logits.to_f32().unwrap();
            let rounded: Vec<u16> = match host {
                HostDType::BF16 => values
                    .iter()
                    .map(|v| bf16::from_f32(*v).to_bits())
                    .collect(),
                _ => values.iter().map(|v| f16::from_f32(*v).to_bits()).collect(),
            };
            assert_eq!(
                tapped.bytes,
                words_bytes(&rounded),
                "{tag} step {k}: the cast's words"
            );
            let stats = Statistics::of(tapped);
            assert_eq!(stats.dtype, host);
            assert_eq!(
                stats.xxh3,
                xxhash_rust::xxh3::xxh3_128(&tapped.bytes),
                "the raw words hashed"
            );
            let widened = widened_bits(host, &rounded);
            let max_abs = widened
                .iter()
                .fold(0.0_f64, |m, b| m.max(f64::from(f32::from_bits(*b)).abs()));
            assert_eq!(stats.max_abs, max_abs);
            assert_eq!(stats.to_json()["dtype"], tag.to_uppercase());
        }
        // the parameters loaded from bf16 into the f32 module: recorded f32, the exact widening
        let loaded = InitFile::read(&init).unwrap();
        let words = &loaded.param("fc.weight").unwrap().bytes;
        let words: Vec<u16> = words
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(
            f32_bits(&trace.tensors["step0.params_before.fc.weight"]),
            widened_bits(HostDType::BF16, &words)
        );
    }
}

/// A safetensors file: the 8-byte length, `header`, then `data`.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn a_hostile_half_header_is_refused_in_one_line_naming_the_tensor() {
    let meta = r#""__metadata__":{"burnside.format":"init","burnside.version":"1"}"#;
    for dtype in ["BF16", "F16"] {
        for (tag, shape, offsets, data, words) in [
            (
                "odd",
                "[3]",
                "[0,5]",
                5,
                "[3], 6 bytes, but its data_offsets [0, 5] hold 5",
            ),
            (
                "short",
                "[4]",
                "[0,6]",
                6,
                "[4], 8 bytes, but its data_offsets [0, 6] hold 6",
            ),
            (
                "square",
                "[2,2]",
                "[0,6]",
                6,
                "[2, 2], 8 bytes, but its data_offsets [0, 6] hold 6",
            ),
        ] {
            let header = format!(
                r#"{{{meta},"params.w":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#
            );
            let path = common::scratch("half", &format!("hostile-{dtype}-{tag}.safetensors"));
            std::fs::write(&path, raw(&header, &vec![0_u8; data])).unwrap();
            let message = InitFile::read(&path).expect_err("refused").to_string();
            assert!(!message.contains('\n'), "one line: {message}");
            assert!(message.contains("params.w"), "names the tensor: {message}");
            assert!(
                message.contains(&path.display().to_string()),
                "names the file: {message}"
            );
            let words = format!("{dtype} {words}");
            assert!(
                message.contains(&words),
                "{dtype} {tag}: `{words}` in {message}"
            );
        }
    }
}

//! Statistics-only recording (format version 3): `Training` follows the init file's
//! `full_steps` and `layer_statistics`, and each tensor recorded as statistics has the
//! statistics of the tensor the same loop records in full.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod common;
use common::{fixture, tiny};

use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::Device;
use burnside_trace::{
    HostDType, HostTensor, InitFile, OptimizerSpec, PortArgs, SafetensorsFile, Statistics, Training,
};
use serde_json::Value;

/// `tiny_init.safetensors` with `extra` metadata keys, written to a scratch file.
fn init_with(name: &str, extra: &[(&str, &str)]) -> PathBuf {
    let source = SafetensorsFile::read(fixture("tiny_init.safetensors")).unwrap();
    let path = common::scratch("statistics", name);
    let dtype = |d: HostDType| match d {
        HostDType::F32 => safetensors::Dtype::F32,
        HostDType::F64 => safetensors::Dtype::F64,
        HostDType::I64 => safetensors::Dtype::I64,
        HostDType::BF16 => safetensors::Dtype::BF16,
        HostDType::F16 => safetensors::Dtype::F16,
    };
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = source
        .tensors
        .iter()
        .map(|(name, t)| {
            let view =
                safetensors::tensor::TensorView::new(dtype(t.dtype), t.shape.clone(), &t.bytes)
                    .unwrap();
            (name.clone(), view)
        })
        .collect();
    let mut metadata: HashMap<String, String> = source.metadata.clone().into_iter().collect();
    for (key, value) in extra {
        metadata.insert(key.to_string(), value.to_string());
    }
    safetensors::tensor::serialize_to_file(views, Some(metadata), &path).unwrap();
    path
}

/// Three Adam steps of the tiny model from `init`, its layer tapped, written to `out`.
fn train(init: &Path, out: &str) -> SafetensorsFile {
    let out = common::scratch("statistics", out);
    let line = format!("--init {} -o {} --steps 3", init.display(), out.display());
    let args = PortArgs::parse(line.split_whitespace().map(String::from)).unwrap();
    let device = Device::default().autodiff();
    let init = InitFile::read(init).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let model = init.load_module(tiny(&device)).unwrap();
    Training::new(OptimizerSpec::adam(0.1))
        .run(&args, &init, &device, model, |model, step| {
            let x = step.float_input::<2>("x")?;
            let logits = model.fc.forward(x);
            step.tap().activation("fc", &logits)?;
            let loss = ce.forward(logits.clone(), step.int_input::<1>("y")?);
            Ok((logits, loss))
        })
        .unwrap();
    let file = SafetensorsFile::read(&out).unwrap();
    std::fs::remove_file(out).unwrap();
    file
}

/// `a` and `b` are the same statistics entry: the same keys, dtype, shape, count and hash, and
/// numbers equal to within serde_json's float parsing (not exact to the last digit without its
/// `float_roundtrip` feature).
fn same_statistics(a: &Value, b: &Value, name: &str) {
    let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{name}"
    );
    for key in ["dtype", "shape", "nonfinite", "xxh3"] {
        assert_eq!(a[key], b[key], "{name}: {key}");
    }
    for key in ["mean", "norm", "max_abs"] {
        let (x, y) = (a[key].as_f64().unwrap(), b[key].as_f64().unwrap());
        assert!(
            (x - y).abs() <= 1e-15 * x.abs().max(y.abs()),
            "{name}: {key} {x} {y}"
        );
    }
}

#[test]
fn the_steps_not_full_are_statistics_of_what_the_full_loop_records() {
    let asked = init_with(
        "asked.safetensors",
        &[("full_steps", "[0, 2]"), ("layer_statistics", "true")],
    );
    let init = InitFile::read(&asked).unwrap();
    assert_eq!(init.full_steps(), Some(vec![0, 2]));
    let partial = train(&asked, "partial.safetensors");
    let full = train(&fixture("tiny_init.safetensors"), "full.safetensors");

    assert_eq!(partial.meta("burnside.version").unwrap(), "3");
    assert_eq!(partial.meta("full_steps").unwrap(), "[0,2]");
    assert_eq!(partial.meta("layer_statistics").unwrap(), "true");
    assert!(full.meta("statistics").is_err());
    assert_ne!(full.meta("burnside.version").unwrap(), "3");
    let statistics: serde_json::Map<String, Value> =
        serde_json::from_str(partial.meta("statistics").unwrap()).unwrap();
    let mut names: Vec<&str> = statistics.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        vec![
            "step0.activations.fc",
            "step1.activations.fc",
            "step1.grads.fc.bias",
            "step1.grads.fc.weight",
            "step1.logits",
            "step1.optim.exp_avg.fc.bias",
            "step1.optim.exp_avg.fc.weight",
            "step1.optim.exp_avg_sq.fc.bias",
            "step1.optim.exp_avg_sq.fc.weight",
            "step1.params_after.fc.bias",
            "step1.params_after.fc.weight",
            "step1.params_before.fc.bias",
            "step1.params_before.fc.weight",
            "step2.activations.fc",
        ]
    );
    // never statistics: the inputs, the start, 0-d scalars; a full step's tensors in full
    for name in [
        "step1.inputs.x",
        "step1.inputs.y",
        "step0.params_before.fc.weight",
        "step1.loss",
        "step1.optim.step.fc.weight",
        "step2.params_after.fc.weight",
        "step2.grads.fc.weight",
        "step2.loss_after",
    ] {
        assert!(partial.tensors.contains_key(name), "{name} in full");
    }
    // step 1's params_before is statistics (computed, not aliased) and its params_after too:
    // step 2's params_before is in full, an alias of nothing
    assert!(
        partial
            .tensors
            .contains_key("step2.params_before.fc.weight")
    );
    assert!(partial.meta("aliases").is_err(), "no alias");
    // the same loop in full (its params_before aliases of the step before's params_after)
    let full_aliases: serde_json::Map<String, Value> =
        serde_json::from_str(full.meta("aliases").unwrap()).unwrap();
    let in_full = |name: &str| -> &HostTensor {
        let held = full_aliases.get(name).map_or(name, |t| t.as_str().unwrap());
        &full.tensors[held]
    };
    // every statistics entry is that of the tensor recorded in full
    for (name, entry) in &statistics {
        same_statistics(entry, &Statistics::of(in_full(name)).to_json(), name);
    }
    for (name, tensor) in &partial.tensors {
        assert_eq!(tensor, in_full(name), "{name}");
    }
    std::fs::remove_file(asked).unwrap();
}

#[test]
fn layer_statistics_alone_keeps_every_step_full_but_the_layers() {
    let asked = init_with("layers.safetensors", &[("layer_statistics", "true")]);
    let partial = train(&asked, "layers-out.safetensors");
    let statistics: serde_json::Map<String, Value> =
        serde_json::from_str(partial.meta("statistics").unwrap()).unwrap();
    let names: Vec<&str> = statistics.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "step0.activations.fc",
            "step1.activations.fc",
            "step2.activations.fc"
        ]
    );
    assert!(partial.meta("full_steps").is_err(), "every step full");
    let aliases: Value = serde_json::from_str(partial.meta("aliases").unwrap()).unwrap();
    assert_eq!(
        aliases["step2.params_before.fc.weight"], "step1.params_after.fc.weight",
        "the alias logic stays for full steps"
    );
    assert!(partial.tensors.contains_key("step1.params_after.fc.weight"));
    std::fs::remove_file(asked).unwrap();
}

//! Round trips against files written by Python (`fixtures/make_fixtures.py`): an init file is
//! loaded bit for bit into a burn module, one step is recorded, and the written trace reads
//! back in PyTorch names and layout, agreeing with the numpy-computed logits and loss.

use std::path::PathBuf;

mod common;
use common::{Tiny, fixture, tiny};

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig};
use burn::optim::GradientsParams;
use burn::tensor::Device;
use burnside_trace::{
    HostDType, InitFile, OptimizerSpec, SafetensorsFile, TorchNames, TraceError, TraceRecorder,
};

fn scratch(name: &str) -> PathBuf {
    common::scratch("it", name)
}

#[test]
fn init_file_loads_bit_for_bit_in_burn_layout() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let model = init.load_module(tiny(&device)).unwrap();
    assert_eq!(
        model.fc.weight.val().dims(),
        [3, 2],
        "burn keeps Linear weights as [in, out]"
    );
    // every parameter, as the recorder reads it back in PyTorch name and layout
    let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
    recorder.params_before(0, &model).unwrap();
    let params: Vec<(&str, _)> = recorder
        .tensors()
        .iter()
        .filter_map(|(name, value)| Some((name.strip_prefix("step0.params_before.")?, value)))
        .collect();
    assert_eq!(params.len(), 2, "fc.weight and fc.bias");
    for (torch, value) in params {
        assert_eq!(value, init.param(torch).unwrap(), "{torch}");
    }
    assert!(model.fc.weight.val().is_require_grad());
    let x = init.float_input_at::<2>(0, "x", &device).unwrap();
    assert_eq!(
        x.into_data().try_to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, -0.5, 0.25, 4.0]
    );
    let y = init.int_input_at::<1>(0, "y", &device).unwrap();
    assert_eq!(y.into_data().try_into_vec_as::<i64>().unwrap(), vec![1, 0]);
    assert!(
        init.int_input_at::<1>(0, "x", &device).is_err(),
        "a float input is not read as labels"
    );
}

#[test]
fn one_recorded_step_reads_back_in_pytorch_layout_and_matches_numpy() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let reference = SafetensorsFile::read(fixture("tiny_trace.safetensors")).unwrap();
    let mut model = init.load_module(tiny(&device)).unwrap();
    let (x, y) = (
        init.float_input_at::<2>(0, "x", &device).unwrap(),
        init.int_input_at::<1>(0, "y", &device).unwrap(),
    );
    let spec = OptimizerSpec::adam(0.01);
    let mut optim = spec.init();
    let mut recorder = TraceRecorder::new(spec.clone());

    recorder.input(0, "x", x.to_data()).unwrap();
    recorder.input(0, "y", y.to_data()).unwrap();
    recorder.params_before(0, &model).unwrap();
    let logits = model.forward_logits(x.clone());
    recorder.logits(0, &logits).unwrap();
    let loss = CrossEntropyLossConfig::new()
        .init(&device)
        .forward(logits, y.clone());
    recorder.loss(0, &loss).unwrap();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    recorder.grads(0, &model, &grads).unwrap();
    model = optim.step(spec.lr(), model, grads);
    recorder.params_after(0, &model).unwrap();
    recorder.optim(0, &model, &optim).unwrap();
    let loss_after = CrossEntropyLossConfig::new()
        .init(&device)
        .forward(model.forward_logits(x), y);
    recorder.loss_after(0, &loss_after).unwrap();
    let path = scratch("tiny_burn.safetensors");
    recorder.write(&path).unwrap();

    let trace = SafetensorsFile::read(&path).unwrap();
    let t = |name: &str| {
        trace
            .tensors
            .get(name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let r = |name: &str| {
        reference
            .tensors
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in fixture"))
    };
    for name in [
        "step0.inputs.x",
        "step0.inputs.y",
        "step0.params_before.fc.weight",
        "step0.params_before.fc.bias",
    ] {
        assert_eq!(
            t(name),
            r(name),
            "{name} must be bit-identical to the Python side"
        );
    }
    let close = |name: &str, tol: f32| {
        let (a, b) = (t(name).to_f32().unwrap(), r(name).to_f32().unwrap());
        assert_eq!(t(name).shape, r(name).shape, "{name}");
        for (u, v) in a.iter().zip(&b) {
            assert!((u - v).abs() <= tol, "{name}: {u} vs {v}");
        }
    };
    close("step0.logits", 1e-6);
    close("step0.loss", 1e-6);
    assert_eq!(t("step0.loss").shape, Vec::<usize>::new());
    assert_eq!(t("step0.grads.fc.weight").shape, vec![2, 3]);
    assert_eq!(t("step0.params_after.fc.weight").shape, vec![2, 3]);
    assert_eq!(t("step0.optim.exp_avg.fc.weight").shape, vec![2, 3]);
    assert_eq!(t("step0.optim.exp_avg_sq.fc.bias").shape, vec![2]);
    assert_eq!(t("step0.optim.step.fc.bias").to_f32().unwrap(), vec![1.0]);
    assert_eq!(t("step0.inputs.y").dtype, HostDType::I64);
    // Adam's first moment after one step is (1 - beta_1) * grad, in the same (PyTorch) layout.
    let grad = t("step0.grads.fc.weight").to_f32().unwrap();
    let m1 = t("step0.optim.exp_avg.fc.weight").to_f32().unwrap();
    for (g, m) in grad.iter().zip(&m1) {
        assert!(
            (m - (1.0 - 0.9_f32) * g).abs() <= 1e-7,
            "exp_avg {m} vs 0.1 * grad {g}"
        );
    }
    for (key, value) in [
        ("burnside.format", "trace"),
        ("burnside.version", "1"),
        ("framework", "burn"),
        ("steps", "1"),
        ("grads_len", "[2]"),
        ("params", r#"["fc.weight","fc.bias"]"#),
    ] {
        assert_eq!(trace.meta(key).unwrap(), value, "{key}");
    }
    let optimizer: serde_json::Value =
        serde_json::from_str(trace.meta("optimizer").unwrap()).unwrap();
    assert_eq!(optimizer["eps"], 1e-8);
}

#[test]
fn a_trace_file_is_not_an_init_file() {
    let error = InitFile::read(fixture("tiny_trace.safetensors")).unwrap_err();
    assert!(matches!(error, TraceError::Format { .. }));
    assert!(error.to_string().contains("expected `init`"), "{error}");
}

#[test]
fn a_module_that_does_not_match_the_init_file_is_refused() {
    #[derive(Module, Debug)]
    struct Renamed {
        head: Linear,
    }
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let error = init
        .load_module(Renamed {
            head: LinearConfig::new(3, 2).init(&device),
        })
        .unwrap_err();
    // Every missing and every unused tensor at once, each with the closest name on the other side.
    let message = error.to_string();
    for line in [
        "`head.weight` -> `head.weight`",
        "`head.bias` -> `head.bias`",
        "`fc.weight` (`head.weight`?)",
        "`fc.bias` (`head.bias`?)",
    ] {
        assert!(message.contains(line), "{line} in {message}");
    }
    assert!(message.contains("TorchNames::new().table"), "{message}");
    // The same mapping, given once, makes it load.
    let names = TorchNames::new().rename(r"^head\.", "fc.").unwrap();
    let renamed = init
        .clone()
        .with_names(names)
        .load_module(Renamed {
            head: LinearConfig::new(3, 2).init(&device),
        })
        .unwrap();
    assert_eq!(
        renamed.head.weight.val().into_data(),
        init.load_module(tiny(&device))
            .unwrap()
            .fc
            .weight
            .val()
            .into_data()
    );
    let error = init
        .load_module(Tiny {
            fc: LinearConfig::new(2, 3).init(&device),
        })
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`fc.weight`: the file's tensor is [3, 2]"),
        "{error}"
    );
}

impl Tiny {
    fn forward_logits(&self, x: burn::tensor::Tensor<2>) -> burn::tensor::Tensor<2> {
        self.fc.forward(x)
    }
}

use super::*;
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use serde_json::{Value, json};

use crate::stream_writer::StreamWriter;

#[test]
fn a_trace_without_loss_after_is_refused_before_anything_is_written() {
    let device = Device::default().autodiff();
    let layer = LinearConfig::new(2, 2).init(&device);
    let x = Tensor::<2>::ones([1, 2], &device);
    let spec = OptimizerSpec::sgd(0.1);
    let mut optim = spec.init();
    let mut recorder = TraceRecorder::new(spec);
    let missing = |recorder: &TraceRecorder| recorder.metadata().unwrap_err().to_string();
    assert!(missing(&recorder).contains("no step recorded"));
    recorder.input(0, "x", x.to_data()).unwrap();
    assert_eq!(
        missing(&recorder),
        "incomplete trace: step 0 has no params_before: call `recorder.params_before(step, &model)` before the forward pass"
    );
    recorder.params_before(0, &layer).unwrap();
    let logits = layer.forward(x);
    recorder.logits(0, &logits).unwrap();
    assert!(missing(&recorder).contains("step 0 has no loss: call `recorder.loss(step, &loss)`"));
    let loss = logits.sum();
    recorder.loss(0, &loss).unwrap();
    assert!(missing(&recorder).contains("step 0 has no grads: call `recorder.grads("));
    let grads = GradientsParams::from_grads(loss.backward(), &layer);
    recorder.grads(0, &layer, &grads).unwrap();
    assert!(
        missing(&recorder)
            .contains("step 0 has no params_after: call `recorder.params_after(step, &model)`")
    );
    let layer = optim.step(0.1, layer, grads);
    recorder.params_after(0, &layer).unwrap();
    assert!(
        missing(&recorder)
            .contains("step 0 has no optimizer state: call `recorder.optim(step, &model, &optim)`")
    );
    recorder.optim(0, &layer, &optim).unwrap();
    let error = recorder.metadata().unwrap_err();
    assert!(error.to_string().contains("loss_after"), "{error}");
    assert_eq!(recorder.tensors()["step0.grads.weight"].shape, vec![2, 2]);
    assert_eq!(recorder.tensors()["step0.loss"].shape, Vec::<usize>::new());
}

/// One complete step of a `Linear` on `device`, recorded by `recorder`.
fn one_step(mut recorder: TraceRecorder, device: &Device) -> TraceRecorder {
    let layer = LinearConfig::new(2, 2).init(device);
    let spec = OptimizerSpec::sgd(0.1);
    let mut optim = spec.init();
    let x = Tensor::<2>::ones([1, 2], device);
    recorder.input(0, "x", x.to_data()).unwrap();
    recorder.params_before(0, &layer).unwrap();
    let logits = layer.forward(x.clone());
    recorder.logits(0, &logits).unwrap();
    let loss = logits.sum();
    recorder.loss(0, &loss).unwrap();
    let grads = GradientsParams::from_grads(loss.backward(), &layer);
    recorder.grads(0, &layer, &grads).unwrap();
    let layer = optim.step(0.1, layer, grads);
    recorder.params_after(0, &layer).unwrap();
    recorder.optim(0, &layer, &optim).unwrap();
    recorder.loss_after(0, &layer.forward(x).sum()).unwrap();
    recorder
}

#[test]
fn device_and_dtype_are_the_parameters_and_loss_fn_only_what_the_port_declares() {
    let device = Device::default().autodiff();
    let metadata = one_step(TraceRecorder::new(OptimizerSpec::sgd(0.1)), &device)
        .metadata()
        .unwrap();
    assert_eq!(metadata["device"], "flex");
    assert_eq!(metadata["dtype"], "float32");
    assert!(!metadata.contains_key("loss_fn"), "{metadata:?}");
    let declared = TraceRecorder::new(OptimizerSpec::sgd(0.1))
        .with_loss_fn("cross_entropy")
        .with_metadata("device", "tpu");
    let metadata = one_step(declared, &device).metadata().unwrap();
    assert_eq!(metadata["loss_fn"], "cross_entropy");
    assert_eq!(
        metadata["device"], "flex",
        "seen on the tensors, not declared"
    );
}

#[test]
fn a_streaming_recorder_keeps_nothing_in_memory_and_aliases_the_unchanged_parameters() {
    let device = Device::default().autodiff();
    let dir = std::env::temp_dir().join(format!("burnside-recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("streamed.safetensors");
    let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
    recorder.stream_to(&path, 20).unwrap();
    let layer = LinearConfig::new(2, 2).init(&device);
    recorder.params_after(0, &layer).unwrap();
    recorder.params_before(1, &layer).unwrap();
    assert!(recorder.tensors().is_empty());
    assert!(recorder.contains("step1.params_before.weight"));
    let metadata = recorder.common_metadata(None);
    assert_eq!(metadata["burnside.version"], "2");
    assert_eq!(
        metadata["aliases"],
        r#"{"step1.params_before.bias":"step0.params_after.bias","step1.params_before.weight":"step0.params_after.weight"}"#
    );
    drop(recorder);
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "no .partial left"
    );
}

#[test]
fn an_alias_needs_the_same_dtype_shape_and_bytes_of_the_step_before() {
    let path = std::env::temp_dir().join(format!("burnside-alias-{}.st", std::process::id()));
    let mut writer = StreamWriter::create(&path, 10).unwrap();
    let mut after = BTreeMap::new();
    let w = |values: &[f32], shape: Vec<usize>| HostTensor::from_f32(values, shape);
    let mut put = |name: &str, tensor: HostTensor| {
        stream_put(&mut writer, &mut after, name.to_string(), tensor).unwrap()
    };
    put("step0.params_after.a", w(&[1.0, 2.0], vec![2]));
    put("step0.params_after.b", w(&[1.0, 2.0], vec![2]));
    put("step0.params_after.c", w(&[1.0, 2.0], vec![2]));
    put("step0.params_after.d", w(&[1.0, 2.0], vec![2]));
    put("step1.params_before.a", w(&[1.0, 2.0], vec![2])); // the same: an alias
    put("step1.params_before.b", w(&[1.0, 2.0], vec![1, 2])); // another shape
    put("step1.params_before.c", w(&[1.0, 2.5], vec![2])); // other bytes
    let same_bits_as_i64 = HostTensor {
        dtype: crate::HostDType::I64,
        shape: vec![1],
        bytes: w(&[1.0, 2.0], vec![2]).bytes,
    };
    put("step1.params_before.d", same_bits_as_i64); // another dtype
    put("step2.params_before.a", w(&[1.0, 2.0], vec![2])); // not the step before's
    let aliases: Vec<(&str, &str)> = writer
        .aliases()
        .iter()
        .map(|(a, t)| (a.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        aliases,
        vec![("step1.params_before.a", "step0.params_after.a")]
    );
}

#[test]
fn with_statistics_records_the_steps_not_full_as_statistics_by_the_rule() {
    let device = Device::default().autodiff();
    let recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1)).with_statistics(Some(vec![]), false);
    let recorder = one_step(recorder, &device);
    let names: Vec<&str> = recorder.statistics().keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "step0.grads.bias",
            "step0.grads.weight",
            "step0.logits",
            "step0.params_after.bias",
            "step0.params_after.weight",
        ]
    );
    for full in [
        "step0.inputs.x",
        "step0.params_before.weight",
        "step0.loss",
        "step0.loss_after",
    ] {
        assert!(recorder.tensors().contains_key(full), "{full}");
    }
    let recorded = &recorder.statistics()["step0.grads.weight"];
    assert_eq!(recorded.shape, vec![2, 2], "PyTorch layout");
    let metadata = recorder.metadata().unwrap();
    assert_eq!(metadata["burnside.version"], "3");
    assert_eq!(metadata["full_steps"], "[]");
    assert_eq!(metadata["layer_statistics"], "false");
    let entries: Value = serde_json::from_str(&metadata["statistics"]).unwrap();
    assert_eq!(entries["step0.grads.weight"], recorded.to_json());
    // the same step in full gives the tensors these are the statistics of
    let full = one_step(TraceRecorder::new(OptimizerSpec::sgd(0.1)), &device);
    assert!(!full.metadata().unwrap().contains_key("statistics"));
    let full_steps = one_step(
        TraceRecorder::new(OptimizerSpec::sgd(0.1)).with_statistics(Some(vec![0]), true),
        &device,
    );
    assert!(
        full_steps.statistics().is_empty(),
        "a full step, no layer tapped"
    );
    assert_eq!(full_steps.metadata().unwrap()["burnside.version"], "1");
    assert_eq!(full.tensors()["step0.logits"].shape, vec![1, 2]);
}

#[test]
fn a_forward_trace_records_its_parameters_and_layers_outside_full_steps_as_statistics() {
    let device = Device::default();
    let layer = LinearConfig::new(3, 2).init(&device);
    let mut recorder = TraceRecorder::forward("inference")
        .with_statistics(Some(vec![0]), false)
        .with_params_statistics(true);
    recorder.params_and_buffers(0, &layer).unwrap();
    for k in 0..2 {
        let x = Tensor::<2>::ones([1, 3], &device);
        recorder.input(k, "x", x.to_data()).unwrap();
        let y = layer.forward(x);
        recorder.activation(k, "fc", &y).unwrap();
        recorder
            .put_captured(k, "captured.0", HostTensor::of(&y).unwrap())
            .unwrap();
        recorder.output(k, "output", &y).unwrap();
    }
    let names: Vec<&str> = recorder.statistics().keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "step0.params_before.bias",
            "step0.params_before.weight",
            "step1.activations.fc",
            "step1.captured.0",
        ]
    );
    for full in [
        "step0.inputs.x",
        "step0.activations.fc",
        "step0.captured.0",
        "step0.outputs.output",
        "step1.inputs.x",
        "step1.outputs.output",
    ] {
        assert!(recorder.tensors().contains_key(full), "{full}");
    }
    // hashed in PyTorch's layout: burn's [in, out] weight transposed to [out, in], as the
    // full tensor would be stored
    let weight = &recorder.statistics()["step0.params_before.weight"];
    assert_eq!(weight.shape, vec![2, 3]);
    let full = {
        let mut plain = TraceRecorder::forward("inference");
        plain.params_and_buffers(0, &layer).unwrap();
        plain.tensors()["step0.params_before.weight"].clone()
    };
    assert_eq!(weight, &Statistics::of(&full));
    let metadata = recorder.metadata().unwrap();
    assert_eq!(metadata["params_statistics"], "true");
    assert_eq!(metadata["full_steps"], "[0]");
    assert_eq!(metadata["burnside.version"], "3");
}

#[test]
fn adam_state_is_recorded_parameter_by_parameter_and_foreign_state_is_refused() {
    let device = Device::default().autodiff();
    let layer = LinearConfig::new(2, 3).init(&device);
    let spec = OptimizerSpec::adam(0.1);
    let mut optim = spec.init();
    let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
    let grads = GradientsParams::from_grads(loss.backward(), &layer);
    let layer = optim.step(spec.lr(), layer, grads);
    let mut recorder = TraceRecorder::new(spec.clone());
    recorder.optim(0, &layer, &optim).unwrap();
    let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "step0.optim.exp_avg.bias",
            "step0.optim.exp_avg.weight",
            "step0.optim.exp_avg_sq.bias",
            "step0.optim.exp_avg_sq.weight",
            "step0.optim.step.bias",
            "step0.optim.step.weight",
        ]
    );
    assert_eq!(
        recorder.tensors()["step0.optim.exp_avg.weight"].shape,
        vec![3, 2]
    );
    assert_eq!(
        recorder.tensors()["step0.optim.step.weight"]
            .to_f32()
            .unwrap(),
        vec![1.0]
    );
    // the state of another module's parameters is no state of this one
    let other = LinearConfig::new(2, 3).init(&device);
    let error = TraceRecorder::new(spec)
        .optim(0, &other, &optim)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("belongs to no parameter of this module"),
        "{error}"
    );
}

#[test]
fn plain_sgd_has_no_optimizer_state() {
    let device = Device::default().autodiff();
    let layer = LinearConfig::new(2, 3).init(&device);
    let spec = OptimizerSpec::sgd(0.1);
    let mut optim = spec.init();
    let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
    let grads = GradientsParams::from_grads(loss.backward(), &layer);
    let layer = optim.step(spec.lr(), layer, grads);
    let mut recorder = TraceRecorder::new(spec);
    recorder.optim(0, &layer, &optim).unwrap();
    assert!(recorder.tensors().is_empty());
}

#[test]
fn sgd_momentum_velocity_is_recorded_as_momentum_buffer_in_pytorch_layout() {
    let device = Device::default().autodiff();
    let layer = LinearConfig::new(2, 3).init(&device);
    let spec = OptimizerSpec::Sgd {
        lr: 0.1,
        momentum: Some(0.9),
        dampening: 0.0,
        nesterov: false,
        weight_decay: 0.0,
    };
    let mut optim = spec.init();
    let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
    let grads = GradientsParams::from_grads(loss.backward(), &layer);
    let mut recorder = TraceRecorder::new(spec);
    recorder.grads(0, &layer, &grads).unwrap();
    let layer = optim.step(0.1, layer, grads);
    recorder.optim(0, &layer, &optim).unwrap();
    let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "step0.grads.bias",
            "step0.grads.weight",
            "step0.optim.momentum_buffer.bias",
            "step0.optim.momentum_buffer.weight",
        ]
    );
    let buffer = &recorder.tensors()["step0.optim.momentum_buffer.weight"];
    assert_eq!(buffer.shape, vec![3, 2], "PyTorch layout");
    // With dampening 0, the first velocity is the gradient itself.
    assert_eq!(buffer, &recorder.tensors()["step0.grads.weight"]);
}

fn loss_grads_again(layer: &burn::nn::Linear) -> burn::tensor::Gradients {
    let device = layer.weight.val().device();
    layer
        .forward(Tensor::<2>::ones([1, 2], &device))
        .sum()
        .backward()
}

#[test]
fn parameter_groups_step_with_their_own_optimizers_and_are_declared_as_pytorchs() {
    let device = Device::default().autodiff();
    let layer = LinearConfig::new(2, 2).init(&device);
    let decayed = OptimizerSpec::adamw(0.1).with_weight_decay(0.5);
    let plain = OptimizerSpec::adamw(0.1).with_weight_decay(0.0);
    let (mut optim_decayed, mut optim_plain) = (decayed.init(), plain.init());
    let mut recorder = TraceRecorder::new(decayed.clone()).with_group(plain.clone(), &["bias"]);
    let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
    recorder.loss(0, &loss).unwrap();
    recorder.logits(0, &loss.clone().reshape([1, 1])).unwrap();
    let mut grads = loss.backward();
    let bias_id = layer.bias.as_ref().unwrap().id;
    let bias_grads = GradientsParams::from_params(&mut grads, &layer, &[bias_id]);
    let weight_grads = GradientsParams::from_params(&mut grads, &layer, &[layer.weight.id]);
    let (weight_grads_copy, bias_grads_copy) = (
        GradientsParams::from_params(&mut loss_grads_again(&layer), &layer, &[layer.weight.id]),
        GradientsParams::from_params(&mut loss_grads_again(&layer), &layer, &[bias_id]),
    );
    recorder.params_before(0, &layer).unwrap();
    let bias_before = layer.bias.as_ref().unwrap().val().into_data();
    let layer = optim_decayed.step(0.1, layer, weight_grads);
    assert_eq!(
        layer.bias.as_ref().unwrap().val().into_data(),
        bias_before,
        "not this optimizer's"
    );
    let layer = optim_plain.step(0.1, layer, bias_grads);
    assert_ne!(layer.bias.as_ref().unwrap().val().into_data(), bias_before);
    recorder.grads(0, &layer, &weight_grads_copy).unwrap();
    recorder.grads(0, &layer, &bias_grads_copy).unwrap();
    recorder
        .input(0, "x", TensorData::from([[1.0f32, 1.0]]))
        .unwrap();
    recorder.params_after(0, &layer).unwrap();
    recorder.optim(0, &layer, &optim_decayed).unwrap();
    recorder.optim(0, &layer, &optim_plain).unwrap();
    recorder.loss_after(0, &loss).unwrap();
    assert_eq!(recorder.grads_len[&0], 2, "one per group's part");
    let metadata = recorder.metadata().unwrap();
    let optimizer: Value = serde_json::from_str(&metadata["optimizer"]).unwrap();
    assert_eq!(optimizer["weight_decay"], json!(0.5));
    assert_eq!(optimizer["param_groups"], json!(2));
    assert_eq!(
        optimizer["groups"],
        json!([{"params": ["weight"]}, {"params": ["bias"], "weight_decay": 0.0}])
    );
}

#[derive(Module, Debug)]
struct Twins {
    online: burn::nn::Linear,
    target: burn::nn::Linear,
}

#[test]
fn a_cloned_module_sharing_param_ids_has_its_gradient_and_state_recorded_once() {
    let device = Device::default().autodiff();
    let online = LinearConfig::new(2, 2).init(&device);
    let twins = Twins {
        target: online.clone(), // the same ParamIds, as `model.q.clone()` gives
        online,
    };
    let loss = twins
        .online
        .forward(Tensor::<2>::ones([1, 2], &device))
        .sum();
    let grads = GradientsParams::from_grads(loss.backward(), &twins);
    let spec = OptimizerSpec::adam(0.1);
    let mut optim = spec.init();
    let mut recorder = TraceRecorder::new(spec.clone());
    recorder.grads(0, &twins, &grads).unwrap();
    let twins = optim.step(spec.lr(), twins, grads);
    recorder.optim(0, &twins, &optim).unwrap();
    let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
    assert!(names.iter().all(|n| n.contains(".online.")), "{names:?}");
    assert!(names.contains(&"step0.grads.online.weight"));
    assert!(names.contains(&"step0.optim.exp_avg.online.weight"));
    // burn's optimizer updated the first of the two only
    assert_ne!(
        twins.online.weight.val().into_data(),
        twins.target.weight.val().into_data()
    );
}

#[test]
fn buffers_are_recorded_after_the_forward_that_updated_them() {
    use burn::nn::BatchNormConfig;
    let device = Device::default().autodiff();
    let bn = BatchNormConfig::new(2).init(&device);
    // Channel 0 has mean 2 and biased variance 1 (unbiased 4/3); channel 1 is constant 0.
    let x = Tensor::<3>::from_data(
        [[[1.0, 3.0], [0.0, 0.0]], [[1.0, 3.0], [0.0, 0.0]]],
        &device,
    );
    let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
    let out = bn.forward(x);
    recorder.activation(0, "bn", &out).unwrap();
    recorder.params_before(0, &bn).unwrap();
    recorder.params_after(0, &bn).unwrap();
    let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "step0.activations.bn",
            "step0.buffers.running_mean",
            "step0.buffers.running_var",
            "step0.params_after.bias",
            "step0.params_after.weight",
            "step0.params_before.bias",
            "step0.params_before.weight",
        ]
    );
    let mean = recorder.tensors()["step0.buffers.running_mean"]
        .to_f32()
        .unwrap();
    assert_eq!(
        mean,
        vec![0.2, 0.0],
        "0.9 * 0 + 0.1 * batch mean, not the initial zeros"
    );
    let var = recorder.tensors()["step0.buffers.running_var"]
        .to_f32()
        .unwrap();
    // burn 0.22.1 uses the biased batch variance (PyTorch: 0.9 + 0.1 * 4/3).
    assert!((var[0] - (0.9 + 0.1 * 1.0)).abs() < 1e-6, "{var:?}");
    assert_eq!(recorder.params, vec!["weight", "bias"]);
    assert_eq!(recorder.buffers, vec!["running_mean", "running_var"]);
    assert_eq!(recorder.activations, vec!["bn"]);
}

//! `Training` against the same loop written call by call with `TraceRecorder` (the recipe it
//! replaces): parameter groups, clipping and a schedule together give the same trace, bit for
//! bit; a loop that reads its batch around `Step` is refused at write, naming the call.

use std::error::Error;

mod common;
use common::{Tiny, fixture, tiny};

use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use burnside_trace::{
    ClipGradNorm, InitFile, OptimizerSpec, PortArgs, SafetensorsFile, Step, TraceRecorder, Training,
};

fn args(out: &str, steps: usize) -> PortArgs {
    let line = format!(
        "--init {} -o {} --steps {steps}",
        fixture("tiny_init.safetensors").display(),
        common::scratch("training", out).display()
    );
    PortArgs::parse(line.split_whitespace().map(String::from)).unwrap()
}

const LR: f64 = 0.5;
const CLIP: f32 = 0.3;

fn schedule(step: usize) -> f64 {
    LR * ((step + 1) as f64 / 2.0).min(1.0)
}

fn specs() -> (OptimizerSpec, OptimizerSpec) {
    let main = OptimizerSpec::adamw(LR).with_weight_decay(0.1);
    (main.clone(), main.with_weight_decay(0.0).with_lr(LR / 2.0))
}

#[test]
fn groups_clipping_and_a_schedule_record_what_the_call_by_call_loop_records() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let (main, plain) = specs();
    let steps = 3;

    // the loop as Training runs it
    let new = args("training.safetensors", steps);
    let model = init.load_module(tiny(&device)).unwrap();
    let trained = Training::new(main.clone())
        .with_group(plain.clone(), &["fc.bias"])
        .with_clip_grad_norm(CLIP)
        .with_lr_schedule(schedule)
        .run(&new, &init, &device, model, |model, step| {
            let x = step.float_input::<2>("x")?;
            let y = step.int_input::<1>("y")?;
            let logits = model.fc.forward(x);
            step.tap().activation("fc", &logits)?;
            let loss = ce.forward(logits.clone(), y);
            Ok((logits, loss))
        })
        .unwrap();
    assert_eq!(trained.losses.len(), steps);

    // the same loop, call by call
    let old = args("by-hand.safetensors", steps);
    let mut model = init.load_module(tiny(&device)).unwrap();
    let clip = ClipGradNorm::new(CLIP);
    let mut recorder = TraceRecorder::new(main.clone())
        .with_group(plain.clone(), &["fc.bias"])
        .with_clip_grad_norm(clip);
    let (mut optim_main, mut optim_plain) = (main.init(), plain.init());
    let bias = model.fc.bias.as_ref().unwrap().id;
    for step in 0..steps {
        let x = init.float_input_at::<2>(step, "x", &device).unwrap();
        let y = init.int_input_at::<1>(step, "y", &device).unwrap();
        recorder.input(step, "x", x.to_data()).unwrap();
        recorder.input(step, "y", y.to_data()).unwrap();
        recorder.params_before(step, &model).unwrap();
        let logits = model.fc.forward(x);
        recorder.tap(step).activation("fc", &logits).unwrap();
        recorder.logits(step, &logits).unwrap();
        let loss = ce.forward(logits, y);
        recorder.loss(step, &loss).unwrap();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        recorder.grads(step, &model, &grads).unwrap();
        let mut grads = clip.apply(&model, grads);
        let mut plain_grads = GradientsParams::new();
        plain_grads.register(bias, grads.remove::<1>(bias).unwrap());
        let lr = schedule(step);
        recorder.lr(step, lr);
        model = optim_main.step(lr, model, grads);
        model = optim_plain.step(plain.lr() * lr / LR, model, plain_grads);
        recorder.params_after(step, &model).unwrap();
        recorder.optim(step, &model, &optim_main).unwrap();
        recorder.optim(step, &model, &optim_plain).unwrap();
    }
    let x = init.float_input_at::<2>(steps - 1, "x", &device).unwrap();
    let y = init.int_input_at::<1>(steps - 1, "y", &device).unwrap();
    recorder
        .loss_after(steps - 1, &ce.forward(model.fc.forward(x), y))
        .unwrap();
    recorder.write(&old.out).unwrap();

    let (mut a, b) = (
        SafetensorsFile::read(&new.out).unwrap(),
        SafetensorsFile::read(&old.out).unwrap(),
    );
    // `Training::run` also captures step 0's forward pass without autodiff (the call-by-call
    // loop does not): its ops' outputs and graph, kept where its output is the eager one
    assert!(a.tensors.contains_key("step0.captured.0"));
    assert!(a.meta("captured").is_ok());
    a.tensors
        .retain(|name, _| !name.starts_with("step0.captured."));
    a.metadata
        .retain(|key, _| !matches!(key.as_str(), "captured" | "captured_rounding"));
    assert_eq!(
        a.tensors.keys().collect::<Vec<_>>(),
        b.tensors.keys().collect::<Vec<_>>()
    );
    assert!(a.tensors.contains_key("step2.optim.exp_avg.fc.bias"));
    assert!(a.tensors.contains_key("step2.activations.fc"));
    assert_eq!(a.tensors, b.tensors, "bit for bit");
    assert_eq!(a.metadata, b.metadata);
    let optimizer: serde_json::Value = serde_json::from_str(a.meta("optimizer").unwrap()).unwrap();
    assert_eq!(optimizer["clip_grad_norm"], serde_json::json!(0.3));
    assert_eq!(
        optimizer["lr_per_step"],
        serde_json::json!([0.25, 0.5, 0.5])
    );
    assert_eq!(
        optimizer["groups"][1],
        serde_json::json!({"params": ["fc.bias"], "lr": 0.25, "weight_decay": 0.0})
    );
    // the bias group moved with its own settings: not the main group's decay
    assert_eq!(
        trained.model.fc.bias.as_ref().unwrap().val().into_data(),
        model.fc.bias.as_ref().unwrap().val().into_data()
    );
}

#[test]
fn a_batch_read_around_step_is_refused_at_write_with_the_call_named() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let out = args("no-inputs.safetensors", 1);
    let model = init.load_module(tiny(&device)).unwrap();
    let error = Training::new(OptimizerSpec::sgd(0.1))
        .run(&out, &init, &device, model, |model, _step| {
            let x = init.float_input_at::<2>(0, "x", &device)?; // not through `step`: not recorded
            let logits = model.fc.forward(x);
            Ok((
                logits.clone(),
                ce.forward(logits, init.int_input_at::<1>(0, "y", &device)?),
            ))
        })
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("incomplete trace: step 0 did not record input `x` of the batch: read it with `step.float_input(\"x\")`"),
        "{error}"
    );
    assert!(!out.out.exists(), "nothing written");
}

#[test]
fn a_group_naming_no_parameter_is_refused_before_training() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let out = args("bad-group.safetensors", 1);
    let model = init.load_module(tiny(&device)).unwrap();
    let error = Training::new(OptimizerSpec::sgd(0.1))
        .with_group(OptimizerSpec::sgd(0.2), &["fc.gain"])
        .run(
            &out,
            &init,
            &device,
            model,
            |_: &Tiny, _: &mut Step<'_>| -> Result<(Tensor<2>, Tensor<1>), Box<dyn Error>> {
                unreachable!("not a step is trained")
            },
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "with_group: `fc.gain` is no parameter of the model (its PyTorch names: fc.weight, fc.bias)"
    );
}

#[test]
fn a_step_records_the_models_other_outputs_by_name() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let new = args("outputs.safetensors", 2);
    let model = init.load_module(tiny(&device)).unwrap();
    Training::new(OptimizerSpec::sgd(LR))
        .run(&new, &init, &device, model, |model: &Tiny, step| {
            let x = step.float_input::<2>("x")?;
            let logits = model.fc.forward(x);
            // a second output of the forward pass, as PyTorch's `outputs.1` of a tuple
            step.output("1", &logits.clone().exp())?;
            let loss = ce.forward(logits.clone(), step.int_input::<1>("y")?);
            Ok((logits, loss))
        })
        .unwrap();
    let trace = SafetensorsFile::read(&new.out).unwrap();
    for k in 0..2 {
        let logits = &trace.tensors[&format!("step{k}.logits")];
        let second = &trace.tensors[&format!("step{k}.outputs.1")];
        assert_eq!(second.shape, logits.shape);
        let (l, s) = (logits.to_f32().unwrap(), second.to_f32().unwrap());
        assert!(
            l.iter()
                .zip(&s)
                .all(|(l, s)| (l.exp() - s).abs() <= 1e-6 * s.abs().max(1.0))
        );
    }
    assert_eq!(trace.meta("outputs").unwrap(), r#"["1"]"#);
}

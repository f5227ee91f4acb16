//! `Training::with_accumulation`: the closure called once per micro-batch, the gradients summed with
//! burn's `GradientsAccumulator` before one optimizer step, each micro-batch recorded under
//! `step{k}.micro_*.{j}`; a recorder declaring accumulation refuses a trace with a micro-batch
//! loss missing, naming the call.

mod common;
use common::{fixture, tiny};

use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::GradientsParams;
use burn::tensor::Device;
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, SafetensorsFile, TraceRecorder, Training};

const M: usize = 3;

fn args(out: &str, steps: usize) -> PortArgs {
    let line = format!(
        "--init {} -o {} --steps {steps}",
        fixture("tiny_init.safetensors").display(),
        common::scratch("accumulation", out).display()
    );
    PortArgs::parse(line.split_whitespace().map(String::from)).unwrap()
}

#[test]
fn the_closure_runs_per_micro_batch_and_the_step_is_on_the_summed_gradient() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let out = args("accumulated.safetensors", 2);
    let model = init.load_module(tiny(&device)).unwrap();
    let mut calls = Vec::new();
    let trained = Training::new(OptimizerSpec::sgd(0.1))
        .with_accumulation(M)
        .run(&out, &init, &device, model, |model, step| {
            calls.push((step.index(), step.micro_index()));
            let x = step.float_input::<2>("x")?;
            let y = step.int_input::<1>("y")?;
            let logits = model.fc.forward(x);
            let loss = ce.forward(logits.clone(), y);
            Ok((logits, loss))
        })
        .unwrap();
    // M per step, and M more for loss_after (unrecorded)
    let expected: Vec<_> = (0..3)
        .flat_map(|k| (0..M).map(move |j| (k.min(1), Some(j))))
        .collect();
    assert_eq!(calls, expected);

    let trace = SafetensorsFile::read(&out.out).unwrap();
    assert_eq!(trace.meta("accumulate").unwrap(), "3");
    for j in 0..M {
        for name in [
            format!("step0.micro_inputs.{j}.x"),
            format!("step0.micro_inputs.{j}.y"),
            format!("step0.micro_logits.{j}"),
            format!("step0.micro_loss.{j}"),
        ] {
            assert!(trace.tensors.contains_key(&name), "{name}");
        }
    }
    assert!(!trace.tensors.contains_key("step0.inputs.x"));
    assert!(!trace.tensors.contains_key("step0.logits"));

    // the fixture's one batch serves every micro-batch: the accumulated gradient is the
    // one-batch gradient summed M times, in order, as PyTorch's `.grad` accumulates it
    let model = init.load_module(tiny(&device)).unwrap();
    let x = init.float_input_at::<2>(0, "x", &device).unwrap();
    let y = init.int_input_at::<1>(0, "y", &device).unwrap();
    let loss = ce.forward(model.fc.forward(x), y);
    let mut grads = GradientsParams::from_grads(loss.backward(), &model);
    let g = grads.remove::<2>(model.fc.weight.id).unwrap();
    let mut sum = g.clone();
    for _ in 1..M {
        sum = sum + g.clone();
    }
    let recorded = &trace.tensors["step0.grads.fc.weight"];
    // the trace is in PyTorch's layout, [out, in]: burn's [in, out] transposed
    let expected = sum.transpose().into_data().convert::<f32>();
    assert_eq!(recorded.shape, expected.shape().to_vec());
    assert_eq!(
        recorded.bytes,
        expected.as_bytes().to_vec(),
        "the sum of the M gradients, bit for bit"
    );
    // the step's loss is the M micro-batch losses summed
    let loss: f32 = loss.into_scalar();
    assert_eq!(trained.losses[0], loss + loss + loss);
}

#[test]
fn a_missing_micro_batch_loss_is_refused_at_write_naming_the_call() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let out = args("missing-micro.safetensors", 1);
    let model = init.load_module(tiny(&device)).unwrap();
    let spec = OptimizerSpec::sgd(0.1);
    let mut recorder = TraceRecorder::new(spec.clone()).with_accumulation(2);
    let mut optim = spec.init();
    recorder.params_before(0, &model).unwrap();
    let (x, y) = {
        let mut step = recorder.micro_step(0, 0, &init, &device);
        (
            step.float_input::<2>("x").unwrap(),
            step.int_input::<1>("y").unwrap(),
        )
    };
    let logits = model.fc.forward(x);
    recorder.micro_logits(0, 0, &logits).unwrap();
    let loss = ce.forward(logits, y);
    recorder.micro_loss(0, 0, &loss).unwrap(); // micro-batch 1 never recorded
    recorder.loss(0, &loss).unwrap();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    recorder.grads(0, &model, &grads).unwrap();
    let model = optim.step(0.1, model, grads);
    recorder.params_after(0, &model).unwrap();
    recorder.optim(0, &model, &optim).unwrap();
    recorder.loss_after(0, &loss).unwrap();
    let error = recorder.write(&out.out).unwrap_err();
    assert_eq!(
        error.to_string(),
        "incomplete trace: step 0 has no loss of micro-batch 1 (of the 2 declared by \
         `with_accumulation`): call `recorder.micro_loss(step, j, &loss)` on each"
    );
    assert!(!out.out.exists());
}

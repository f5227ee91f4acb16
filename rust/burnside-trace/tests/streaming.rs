//! Traces streamed to the file as they are recorded (`TraceRecorder::stream_to`, what `Training`
//! and `Inference` do): the same tensors, bit for bit, as a recorder that keeps them in memory;
//! step k's `params_before` an alias of step k-1's `params_after` only when they are the same
//! tensor; nothing at the output (and no `.partial` file) after an error; a file the
//! `safetensors` crate reads, its 8-byte elements 8-aligned.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};

mod common;
use common::{Tiny, fixture, tiny};

use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::GradientsParams;
use burn::tensor::Device;
use burnside_trace::{
    HostTensor, InitFile, OptimizerSpec, PortArgs, SafetensorsFile, TraceError, TraceRecorder,
    Training,
};

fn scratch(name: &str) -> PathBuf {
    common::scratch("streaming", name)
}

fn args(out: &Path, steps: usize) -> PortArgs {
    let line = format!(
        "--init {} -o {} --steps {steps}",
        fixture("tiny_init.safetensors").display(),
        out.display()
    );
    PortArgs::parse(line.split_whitespace().map(String::from)).unwrap()
}

/// The `.partial` files of `path`'s directory that belong to `path`.
fn partials(path: &Path) -> Vec<String> {
    let prefix = format!(".{}.", path.file_name().unwrap().to_string_lossy());
    std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix) && n.ends_with(".partial"))
        .collect()
}

/// The file's aliases (metadata `aliases`, alias -> target).
fn aliases(file: &SafetensorsFile) -> BTreeMap<String, String> {
    file.metadata
        .get("aliases")
        .map(|a| serde_json::from_str(a).unwrap())
        .unwrap_or_default()
}

/// Every tensor of the file by name, an alias as its target's tensor (what a reader presents).
fn expanded(file: &SafetensorsFile) -> BTreeMap<String, HostTensor> {
    let mut tensors = file.tensors.clone();
    for (alias, target) in aliases(file) {
        assert!(!tensors.contains_key(&alias), "{alias} is also a tensor");
        tensors.insert(alias, file.tensors[&target].clone());
    }
    tensors
}

/// What the `safetensors` crate reads of the file, and each tensor's absolute offset is a multiple
/// of its element size.
fn check_with_safetensors_crate(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let (header_len, metadata) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    assert_eq!(header_len % 8, 0);
    for (name, info) in metadata.tensors() {
        let size = info.dtype.bitsize() / 8;
        let start = 8 + header_len + info.data_offsets.0;
        assert_eq!(start % size, 0, "{name} at byte {start}");
    }
    safetensors::SafeTensors::deserialize(&bytes).unwrap().len()
}

/// `steps` Adam steps of the fixture's model recorded call by call; `drop_result` at `step`
/// throws the optimizer's result away (the next step trains the model it started from, as a
/// port that forgets `model = optim.step(..)` does).
fn by_hand(
    mut recorder: TraceRecorder,
    steps: usize,
    drop_result_at: Option<usize>,
) -> TraceRecorder {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let spec = OptimizerSpec::adam(0.1);
    let mut optim = spec.init();
    let mut model = init.load_module(tiny(&device)).unwrap();
    for step in 0..steps {
        let x = init.float_input_at::<2>(step, "x", &device).unwrap();
        let y = init.int_input_at::<1>(step, "y", &device).unwrap();
        recorder.input(step, "x", x.to_data()).unwrap();
        recorder.input(step, "y", y.to_data()).unwrap();
        recorder.params_before(step, &model).unwrap();
        let logits = model.fc.forward(x);
        recorder.logits(step, &logits).unwrap();
        let loss = ce.forward(logits, y);
        recorder.loss(step, &loss).unwrap();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        recorder.grads(step, &model, &grads).unwrap();
        let stepped = optim.step(0.1, model.clone(), grads);
        recorder.params_after(step, &stepped).unwrap();
        recorder.optim(step, &stepped, &optim).unwrap();
        if drop_result_at != Some(step) {
            model = stepped;
        }
    }
    let x = init.float_input_at::<2>(steps - 1, "x", &device).unwrap();
    let y = init.int_input_at::<1>(steps - 1, "y", &device).unwrap();
    recorder
        .loss_after(steps - 1, &ce.forward(model.fc.forward(x), y))
        .unwrap();
    recorder
}

#[test]
fn a_streamed_trace_holds_the_in_memory_ones_tensors_bit_for_bit() {
    let (memory, streamed) = (
        scratch("memory.safetensors"),
        scratch("streamed.safetensors"),
    );
    by_hand(TraceRecorder::new(OptimizerSpec::adam(0.1)), 3, None)
        .write(&memory)
        .unwrap();
    let mut recorder = TraceRecorder::new(OptimizerSpec::adam(0.1));
    recorder.stream_to(&streamed, 100).unwrap();
    let recorder = by_hand(recorder, 3, None);
    assert!(recorder.tensors().is_empty(), "nothing kept in memory");
    assert!(recorder.contains("step2.params_after.fc.weight"));
    assert!(!streamed.exists(), "nothing at the output before write");
    assert_eq!(partials(&streamed).len(), 1);
    recorder.write(&streamed).unwrap();
    assert!(partials(&streamed).is_empty());

    let (a, b) = (
        SafetensorsFile::read(&memory).unwrap(),
        SafetensorsFile::read(&streamed).unwrap(),
    );
    assert_eq!(expanded(&a), expanded(&b), "bit for bit");
    assert_eq!(a.metadata, b.metadata);
    assert_eq!(a.tensors.len(), b.tensors.len(), "the same aliases");
    // every params_before after step 0 is the step before's params_after: 2 steps x 2 params
    let expected: BTreeMap<String, String> = [1, 2]
        .iter()
        .flat_map(|k| {
            ["fc.weight", "fc.bias"].map(|p| {
                (
                    format!("step{k}.params_before.{p}"),
                    format!("step{}.params_after.{p}", k - 1),
                )
            })
        })
        .collect();
    assert_eq!(aliases(&b), expected);
    assert_eq!(b.meta("burnside.version").unwrap(), "2");
    assert!(b.tensors.contains_key("step0.params_before.fc.weight"));
    assert!(!b.tensors.contains_key("step1.params_before.fc.weight"));
    assert_eq!(check_with_safetensors_crate(&streamed), b.tensors.len());
    assert_eq!(check_with_safetensors_crate(&memory), a.tensors.len());
}

#[test]
fn a_step_whose_result_is_dropped_records_the_next_params_before_in_full() {
    let path = scratch("dropped.safetensors");
    let mut recorder = TraceRecorder::new(OptimizerSpec::adam(0.1));
    recorder.stream_to(&path, 100).unwrap();
    by_hand(recorder, 3, Some(1)).write(&path).unwrap();
    let file = SafetensorsFile::read(&path).unwrap();
    let aliases = aliases(&file);
    // step 1 followed step 0's result: aliased; step 2 started from step 1's start: real tensors
    assert!(aliases.contains_key("step1.params_before.fc.weight"));
    let all = expanded(&file);
    for p in ["fc.weight", "fc.bias"] {
        let before = format!("step2.params_before.{p}");
        assert!(!aliases.contains_key(&before), "{aliases:?}");
        assert!(file.tensors.contains_key(&before), "a real tensor");
        assert_eq!(all[&before], all[&format!("step1.params_before.{p}")]);
        assert_ne!(
            all[&before],
            all[&format!("step1.params_after.{p}")],
            "what D001 sees"
        );
    }
    // the same loop in memory writes the same file
    let memory = scratch("dropped-memory.safetensors");
    by_hand(TraceRecorder::new(OptimizerSpec::adam(0.1)), 3, Some(1))
        .write(&memory)
        .unwrap();
    let in_memory = SafetensorsFile::read(&memory).unwrap();
    assert_eq!(expanded(&in_memory), expanded(&file));
    assert_eq!(in_memory.metadata, file.metadata);
}

#[test]
fn an_error_mid_run_leaves_no_file_and_no_partial_and_keeps_the_previous_file() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let out = scratch("error.safetensors");
    std::fs::write(&out, b"an earlier trace").unwrap();
    let model = init.load_module(tiny(&device)).unwrap();
    let error = Training::new(OptimizerSpec::sgd(0.1))
        .run(
            &args(&out, 3),
            &init,
            &device,
            model,
            |model: &Tiny, step| {
                // step 1 feeds the batch without recording it: a stage missing
                let x = if step.index() == 1 {
                    init.float_input_at::<2>(1, "x", &device)?
                } else {
                    step.float_input::<2>("x")?
                };
                let logits = model.fc.forward(x);
                let loss = ce.forward(logits.clone(), step.int_input::<1>("y")?);
                Ok((logits, loss))
            },
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("incomplete trace: step 1 did not record input `x`"),
        "{error}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"an earlier trace");
    assert!(partials(&out).is_empty(), "{:?}", partials(&out));

    // an error the port's closure returns, and no earlier file
    let out = scratch("closure-error.safetensors");
    let model = init.load_module(tiny(&device)).unwrap();
    let error = Training::new(OptimizerSpec::sgd(0.1))
        .run(
            &args(&out, 3),
            &init,
            &device,
            model,
            |model: &Tiny, step| -> Result<_, Box<dyn Error>> {
                let x = step.float_input::<2>("x")?;
                if step.index() == 2 {
                    return Err(TraceError::Setup("the port gave up".to_string()).into());
                }
                let logits = model.fc.forward(x);
                let loss = ce.forward(logits.clone(), step.int_input::<1>("y")?);
                Ok((logits, loss))
            },
        )
        .unwrap_err();
    assert_eq!(error.to_string(), "the port gave up");
    assert!(!out.exists());
    assert!(partials(&out).is_empty());
}

#[test]
fn training_streams_and_writes_the_trace_its_call_by_call_loop_writes() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let ce = CrossEntropyLossConfig::new().init(&device);
    let out = scratch("training.safetensors");
    let model = init.load_module(tiny(&device)).unwrap();
    Training::new(OptimizerSpec::adam(0.1))
        .run(
            &args(&out, 3),
            &init,
            &device,
            model,
            |model: &Tiny, step| {
                let x = step.float_input::<2>("x")?;
                let logits = model.fc.forward(x);
                let loss = ce.forward(logits.clone(), step.int_input::<1>("y")?);
                Ok((logits, loss))
            },
        )
        .unwrap();
    assert!(partials(&out).is_empty());
    let trained = SafetensorsFile::read(&out).unwrap();
    let memory = scratch("training-memory.safetensors");
    by_hand(TraceRecorder::new(OptimizerSpec::adam(0.1)), 3, None)
        .write(&memory)
        .unwrap();
    let by_hand = SafetensorsFile::read(&memory).unwrap();
    // `Training::run` also captures step 0's forward pass (the by-hand loop does not): its ops'
    // outputs end in the logits and the loss the eager pass recorded
    let mut streamed = expanded(&trained);
    let captured: Vec<(String, HostTensor)> = streamed
        .iter()
        .filter(|(name, _)| name.starts_with("step0.captured."))
        .map(|(name, tensor)| (name.clone(), tensor.clone()))
        .collect();
    streamed.retain(|name, _| !name.starts_with("step0.captured."));
    assert!(
        captured.iter().any(|(_, t)| t == &streamed["step0.logits"]),
        "the captured graph holds the logits: {captured:?}"
    );
    assert_eq!(streamed, expanded(&by_hand), "bit for bit");
    assert_eq!(aliases(&trained), aliases(&by_hand));
    assert_eq!(trained.meta("burnside.version").unwrap(), "2");
    check_with_safetensors_crate(&out);
}

#[test]
fn a_one_step_trace_has_no_aliases_and_stays_version_1() {
    let path = scratch("one-step.safetensors");
    let mut recorder = TraceRecorder::new(OptimizerSpec::adam(0.1));
    recorder.stream_to(&path, 10).unwrap();
    by_hand(recorder, 1, None).write(&path).unwrap();
    let file = SafetensorsFile::read(&path).unwrap();
    assert_eq!(file.meta("burnside.version").unwrap(), "1");
    assert!(!file.metadata.contains_key("aliases"));
}

#[test]
fn a_streaming_recorder_refuses_a_name_twice_another_path_and_a_second_stream() {
    let path = scratch("misuse.safetensors");
    let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
    recorder
        .input(0, "x", HostTensor::from_f32(&[1.0], vec![1]).to_data())
        .unwrap();
    recorder.stream_to(&path, 10).unwrap();
    assert!(
        recorder.contains("step0.inputs.x"),
        "recorded before: streamed"
    );
    let twice = recorder
        .input(0, "x", HostTensor::from_f32(&[2.0], vec![1]).to_data())
        .unwrap_err();
    assert!(
        twice
            .to_string()
            .starts_with("tensor `step0.inputs.x`: recorded twice"),
        "{twice}"
    );
    let again = recorder.stream_to(&path, 10).unwrap_err();
    assert!(again.to_string().contains("streams to"), "{again}");
    let elsewhere = scratch("elsewhere.safetensors");
    // incomplete first: the check of the stages comes before the path's
    assert!(matches!(
        recorder.write(&elsewhere),
        Err(TraceError::Incomplete(_))
    ));
    drop(recorder);
    assert!(partials(&path).is_empty());
    assert!(!path.exists() && !elsewhere.exists());

    let mut recorder = TraceRecorder::new(OptimizerSpec::adam(0.1));
    recorder.stream_to(&path, 10).unwrap();
    let recorder = by_hand(recorder, 1, None);
    let wrong = recorder.write(&elsewhere).unwrap_err();
    assert!(wrong.to_string().contains("write there"), "{wrong}");
    recorder.write(&path).unwrap();
    assert!(recorder.write(&path).is_err(), "written once");
    assert!(!elsewhere.exists());
}

/// In the child of [`a_file_size_limit_is_one_line_naming_the_output_and_leaves_nothing`]: stream
/// a 2 MB input to the path in `BURNSIDE_STREAM_CHILD`, write the trace (the thread's failed write
/// is the error then, not the trace's missing stages) and print the error.
fn child_records_past_the_limit() -> bool {
    let Some(path) = std::env::var_os("BURNSIDE_STREAM_CHILD") else {
        return false;
    };
    let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
    let result = recorder.stream_to(&path, 10).and_then(|()| {
        let big = HostTensor::from_f32(&vec![0.5; 1 << 19], vec![1 << 19]);
        recorder.input(0, "x", big.to_data())?;
        recorder.write(&path)
    });
    match result {
        Err(error) => eprintln!("{error}"),
        Ok(()) => eprintln!("no error"),
    }
    true
}

#[test]
fn a_file_size_limit_is_one_line_naming_the_output_and_leaves_nothing() {
    if child_records_past_the_limit() {
        return;
    }
    let out = scratch("limited.safetensors");
    // SIGXFSZ ignored, so the write past `ulimit -f` fails with EFBIG instead of killing the child
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 64 && trap '' XFSZ && exec \"$0\" --exact a_file_size_limit_is_one_line_naming_the_output_and_leaves_nothing --nocapture --test-threads 1")
        .arg(std::env::current_exe().unwrap())
        .env("BURNSIDE_STREAM_CHILD", &out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&out.display().to_string()))
        .unwrap_or_else(|| panic!("no line naming the output in: {stderr}"));
    assert!(
        line.contains(
            "larger than the file-size limit (ulimit -f) or the file system allows: more than"
        ) && line.ends_with("bytes to write; nothing was written"),
        "{line}"
    );
    assert!(!out.exists());
    assert!(partials(&out).is_empty(), "{:?}", partials(&out));
}

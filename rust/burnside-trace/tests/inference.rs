//! `Inference` on a real burn model (Linear, BatchNorm, Gru) loaded from an init file made by
//! real torch (`fixtures/make_fixtures.py`, `forward_fixtures`): the forward trace's names and
//! metadata, burn's outputs against PyTorch's, the batch count, layer isolation and named outputs.

use std::collections::BTreeSet;

mod common;
use common::fixture;

use burn::module::Module;
use burn::nn::{BatchNorm, BatchNormConfig, Gru, GruConfig, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use burnside_trace::{
    HostTensor, Inference, InitFile, PortArgs, SafetensorsFile, Tap, TorchNames, TraceError,
};

/// The fixtures' model: `fc` (Linear 4 -> 6), `bn` (BatchNorm over the 6 features), `gru`
/// (GRU 6 -> 5), on inputs `[batch, time, 4]`.
#[derive(Module, Debug)]
struct Net {
    fc: Linear,
    bn: BatchNorm,
    gru: Gru,
}

impl Net {
    fn new(device: &Device) -> Self {
        Net {
            fc: LinearConfig::new(4, 6).init(device),
            bn: BatchNormConfig::new(6).init(device),
            gru: GruConfig::new(6, 5, true).init(device),
        }
    }

    fn forward(&self, x: Tensor<3>, mut tap: Tap) -> Result<Tensor<3>, TraceError> {
        let h = self.fc.forward(x);
        tap.activation("fc", &h)?;
        let h = self.bn.forward(h.swap_dims(1, 2)); // PyTorch's BatchNorm1d: [batch, C, time]
        tap.activation("bn", &h)?;
        let out = self.gru.forward(h.swap_dims(1, 2), None);
        tap.activation("gru", &out)?;
        Ok(out)
    }
}

fn args(out: &str, line: &str) -> PortArgs {
    let line = format!(
        "--init {} -o {} {line}",
        fixture("forward_init.safetensors").display(),
        common::scratch("inference", out).display()
    );
    PortArgs::parse(line.split_whitespace().map(String::from)).unwrap()
}

fn init() -> InitFile {
    InitFile::read(fixture("forward_init.safetensors")).unwrap()
}

fn torch() -> SafetensorsFile {
    SafetensorsFile::read(fixture("forward_torch.safetensors")).unwrap()
}

/// The largest absolute difference between two f32 tensors of one shape.
fn max_diff(a: &HostTensor, b: &HostTensor) -> f32 {
    assert_eq!(a.shape, b.shape);
    let (a, b) = (a.to_f32().unwrap(), b.to_f32().unwrap());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Run the fixtures' model over `args`' batches on `device`, the plain port.
fn run(args: &PortArgs, device: &Device) -> Result<(), Box<dyn std::error::Error>> {
    let init = init();
    let model = init.load_module(Net::new(device))?;
    Inference::new().with_metadata("port", "net").run(
        args,
        &init,
        device,
        &model,
        |model, batch| {
            let x = batch.float_input::<3>("x")?;
            Ok(model.forward(x, batch.tap())?)
        },
    )
}

#[test]
fn a_forward_trace_on_a_device_without_autodiff_matches_pytorch() {
    let device = Device::default();
    let args = args("inference.safetensors", "--batches 2");
    run(&args, &device).unwrap();
    let trace = SafetensorsFile::read(&args.out).unwrap();
    // every operation's output of the captured forward pass, besides what the taps record
    let names: BTreeSet<&str> = trace
        .tensors
        .keys()
        .map(String::as_str)
        .filter(|n| !n.contains(".captured."))
        .collect();
    assert!(
        trace
            .tensors
            .keys()
            .any(|n| n.starts_with("step1.captured."))
    );
    let mut expect: BTreeSet<String> = [
        "fc.weight",
        "fc.bias",
        "bn.weight",
        "bn.bias",
        "gru.weight_ih_l0",
        "gru.bias_ih_l0",
        "gru.weight_hh_l0",
        "gru.bias_hh_l0",
    ]
    .iter()
    .map(|p| format!("step0.params_before.{p}"))
    .collect();
    expect.insert("step0.buffers.bn.running_mean".into());
    expect.insert("step0.buffers.bn.running_var".into());
    for k in 0..2 {
        expect.insert(format!("step{k}.inputs.x"));
        expect.insert(format!("step{k}.outputs.output"));
        for layer in ["fc", "bn", "gru"] {
            expect.insert(format!("step{k}.activations.{layer}"));
        }
    }
    assert_eq!(names, expect.iter().map(String::as_str).collect());

    let meta = |key: &str| trace.metadata.get(key).map(String::as_str);
    assert_eq!(meta("burnside.format"), Some("trace"));
    assert_eq!(meta("burnside.version"), Some("1"));
    assert_eq!(meta("kind"), Some("forward"));
    assert_eq!(meta("mode"), Some("inference"));
    assert_eq!(meta("framework"), Some("burn"));
    assert_eq!(meta("framework_version"), Some("0.22.1"));
    assert_eq!(meta("device"), Some("flex"));
    assert_eq!(meta("dtype"), Some("float32"));
    assert_eq!(meta("steps"), Some("2"));
    assert_eq!(meta("port"), Some("net"));
    assert_eq!(meta("outputs"), Some(r#"["output"]"#));
    assert_eq!(meta("activations"), Some(r#"["fc","bn","gru"]"#));
    assert_eq!(
        meta("buffers"),
        Some(r#"["bn.running_mean","bn.running_var"]"#)
    );
    assert!(meta("params").unwrap().contains("\"gru.weight_ih_l0\""));
    for absent in ["optimizer", "grads_len", "loss_fn"] {
        assert_eq!(meta(absent), None, "{absent}");
    }

    // the starting point is the init file's, bit for bit: packed GRU gates and Linear layout
    // back in PyTorch's, the trained running statistics as buffers
    let init = init();
    for (name, value) in &trace.tensors {
        if let Some(param) = name.strip_prefix("step0.params_before.") {
            assert_eq!(value, init.param(param).unwrap(), "{param}");
        }
        if let Some(buffer) = name.strip_prefix("step0.buffers.") {
            assert_eq!(value, init.buffer(buffer).unwrap(), "{buffer}");
        }
    }
    assert_eq!(
        trace.tensors["step1.inputs.x"],
        *init.input_at(1, "x").unwrap()
    );
    // burn computes what PyTorch did: BatchNorm on the running statistics, GRU gates in order
    let torch = torch();
    for k in 0..2 {
        for name in ["outputs.output", "activations.bn", "activations.gru"] {
            let key = format!("step{k}.{name}");
            let diff = max_diff(&trace.tensors[&key], &torch.tensors[&key]);
            assert!(diff < 1e-5, "{key}: {diff}");
        }
    }
}

#[test]
fn on_an_autodiff_device_the_mode_is_autodiff_and_batchnorm_takes_the_batch_statistics() {
    let device = Device::default().autodiff();
    let args = args("autodiff.safetensors", "--batches 2");
    run(&args, &device).unwrap();
    let trace = SafetensorsFile::read(&args.out).unwrap();
    assert_eq!(trace.meta("mode").unwrap(), "autodiff");
    assert_eq!(trace.meta("kind").unwrap(), "forward");
    assert!(trace.tensors.keys().all(|k| !k.contains("grads.")));
    // burn's BatchNorm normalises with the batch's statistics on an autodiff device (PyTorch's
    // training mode): the fault a forward check names, seen here on real numbers
    let torch = torch();
    let key = "step0.activations.bn";
    let fc = max_diff(
        &trace.tensors["step0.activations.fc"],
        &torch.tensors["step0.activations.fc"],
    );
    assert!(fc < 1e-5, "fc agrees: {fc}");
    let bn = max_diff(&trace.tensors[key], &torch.tensors[key]);
    assert!(bn > 0.1, "{key}: {bn}");
}

#[test]
fn more_batches_than_the_init_file_holds_is_one_error_and_nothing_is_written() {
    let args = args("too-many.safetensors", "--batches 3");
    let error = run(&args, &Device::default()).unwrap_err().to_string();
    assert!(
        error.ends_with(
            "forward_init.safetensors: --batches 3 asks for more batches than the file's 2 \
             (batch 0 to batch 1); run the port for as many batches as the PyTorch trace has"
        ),
        "{error}"
    );
    assert!(!error.contains('\n'));
    assert!(!args.out.exists());
}

#[test]
fn a_layer_fed_pytorchs_own_input_is_judged_alone() {
    let device = Device::default();
    let init = init();
    let model = init.load_module(Net::new(&device)).unwrap();
    let args = args("isolated.safetensors", "--steps 2");
    let mut missing = None;
    Inference::new()
        .run(&args, &init, &device, &model, |model, batch| {
            let x = batch.float_input::<3>("x")?;
            // the GRU alone, on what PyTorch fed its GRU
            let fed = batch.layer_input::<3>("gru")?;
            let out = model.gru.forward(fed, None);
            batch.tap().activation("gru", &out)?;
            missing = Some(
                batch
                    .layer_input::<3>("encoder.gr")
                    .unwrap_err()
                    .to_string(),
            );
            assert!(batch.int_layer_input::<3>("gru").is_err(), "a float input");
            drop(x);
            Ok(out)
        })
        .unwrap();
    let trace = SafetensorsFile::read(&args.out).unwrap();
    let torch = torch();
    let diff = max_diff(
        &trace.tensors["step1.activations.gru"],
        &torch.tensors["step1.activations.gru"],
    );
    assert!(diff < 1e-5, "{diff}");
    // the bn layer input at batch 1 is PyTorch's, bit for bit
    let bn = init
        .float_layer_input_at::<3>(1, "bn", &device)
        .unwrap()
        .into_data();
    assert_eq!(
        HostTensor::from_data(bn).unwrap(),
        *init.layer_input_at(1, "bn").unwrap()
    );
    assert_eq!(init.layer_inputs(0), vec!["bn", "fc", "gru"]);
    let missing = missing.unwrap();
    assert!(
        missing.contains(
            "no input of module `encoder.gr` for batch 1; the file records the inputs of: `gru`, "
        ) && missing.contains("`fc`")
            && missing.contains("`bn`"),
        "{missing}"
    );
}

#[test]
fn named_outputs_replace_the_returned_tensor_and_an_unread_input_is_refused() {
    let device = Device::default();
    let init = init();
    let model = init.load_module(Net::new(&device)).unwrap();
    let args_named = args("named.safetensors", "--batches 2");
    Inference::new()
        .run(&args_named, &init, &device, &model, |model, batch| {
            let out = model.forward(batch.float_input::<3>("x")?, Tap::off())?;
            let last = out.clone().narrow(1, 2, 1);
            batch.output("0", &out)?;
            batch.output("1", &last)?;
            Ok(out)
        })
        .unwrap();
    let trace = SafetensorsFile::read(&args_named.out).unwrap();
    assert_eq!(trace.meta("outputs").unwrap(), r#"["0","1"]"#);
    assert!(!trace.tensors.contains_key("step0.outputs.output"));
    assert_eq!(trace.tensors["step1.outputs.1"].shape, vec![2, 1, 5]);
    assert!(!trace.metadata.contains_key("activations"), "no tap");

    let unread = args("unread.safetensors", "");
    let error = Inference::new()
        .run(&unread, &init, &device, &model, |_, _| {
            Ok(Tensor::<1>::zeros([1], &device))
        })
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "incomplete trace: batch 0 did not record input `x`: read it with `batch.float_input(\"x\")`"
        ),
        "{error}"
    );
    assert!(!unread.out.exists());
}

#[test]
fn a_pytorch_checkpoint_loads_packed_gru_gates_and_running_stats_as_the_init_file_does() {
    use burn::store::{ModuleSnapshot, PytorchStore};
    let device = Device::default();
    let checkpoint = fixture("forward_state_dict.pt");
    // burn-store alone: the GRU's packed `weight_ih_l0` has no rule, its gates stay unloaded
    let mut alone = Net::new(&device);
    let result = alone
        .load_from(&mut PytorchStore::from_file(&checkpoint).allow_partial(true))
        .unwrap();
    assert!(
        result
            .missing
            .iter()
            .any(|(path, _)| path == "gru.reset_gate.input_transform.weight"),
        "{result}"
    );
    assert!(result.unused.iter().any(|name| name == "gru.weight_ih_l0"));

    let model = burnside_trace::load_pytorch_checkpoint(Net::new(&device), &checkpoint).unwrap();
    let init = init();
    let args = args("checkpoint.safetensors", "--batches 2");
    Inference::new()
        .run(&args, &init, &device, &model, |model, batch| {
            Ok(model.forward(batch.float_input::<3>("x")?, batch.tap())?)
        })
        .unwrap();
    let trace = SafetensorsFile::read(&args.out).unwrap();
    let mut compared = 0;
    for (name, value) in &trace.tensors {
        let start = name
            .strip_prefix("step0.params_before.")
            .and_then(|p| init.param(p))
            .or_else(|| {
                name.strip_prefix("step0.buffers.")
                    .and_then(|b| init.buffer(b))
            });
        if let Some(start) = start {
            assert_eq!(value, start, "{name}: the checkpoint's, bit for bit");
            compared += 1;
        }
    }
    assert_eq!(compared, 10, "8 parameters and 2 running statistics");
    let torch = torch();
    let diff = max_diff(
        &trace.tensors["step1.outputs.output"],
        &torch.tensors["step1.outputs.output"],
    );
    assert!(diff < 1e-5, "{diff}");
}

#[test]
fn a_checkpoint_that_is_missing_not_a_checkpoint_or_of_another_model_is_one_clear_error() {
    let device = Device::default();
    let load = |path: &std::path::Path| {
        burnside_trace::load_pytorch_checkpoint(Net::new(&device), path)
            .unwrap_err()
            .to_string()
    };
    let nowhere = common::scratch("inference", "nowhere.pt");
    assert!(
        load(&nowhere).contains("nowhere.pt: No such file"),
        "{}",
        load(&nowhere)
    );
    let garbage = common::scratch("inference", "garbage.pt");
    std::fs::write(&garbage, b"not a zip, not a pickle").unwrap();
    let message = load(&garbage);
    assert!(
        message.contains("garbage.pt: not a readable PyTorch checkpoint"),
        "{message}"
    );
    assert!(!message.contains('\n'), "{message}");
    let other = load(&fixture("tiny_init.safetensors"));
    assert!(
        other.contains("the burn module does not fit this checkpoint"),
        "{other}"
    );
    assert!(other.contains("`params.fc.weight`"), "{other}");
    assert!(
        other.contains("`fc.weight` <- `params.fc.weight`?")
            && other.contains("then `load_pytorch_checkpoint_with(module, path, &names)`"),
        "{other}"
    );
    let text = load(&fixture("make_fixtures.py"));
    assert!(text.contains("a checkpoint is a `.pt`/`.pth`"), "{text}");
}

/// The same forward passes recorded eagerly (taps only) and under graph capture: every tapped
/// layer and output bit for bit the same, and the captured graph names each operation's
/// parameters in PyTorch's names.
#[test]
fn a_captured_forward_pass_is_the_eager_one_bit_for_bit() {
    let device = Device::default();
    let captured = args("captured.safetensors", "--batches 2");
    run(&captured, &device).unwrap();
    let eager = args("eager.safetensors", "--batches 2");
    let init = init();
    let model = init.load_module(Net::new(&device)).unwrap();
    Inference::new()
        .with_taps_only()
        .run(&eager, &init, &device, &model, |model, batch| {
            let x = batch.float_input::<3>("x")?;
            Ok(model.forward(x, batch.tap())?)
        })
        .unwrap();
    let (captured, eager) = (
        SafetensorsFile::read(&captured.out).unwrap(),
        SafetensorsFile::read(&eager.out).unwrap(),
    );
    assert!(!eager.tensors.keys().any(|n| n.contains(".captured.")));
    assert!(!eager.metadata.contains_key("captured"));
    for (name, tensor) in &eager.tensors {
        assert_eq!(captured.tensors[name].bytes, tensor.bytes, "{name}");
    }
    let graph: serde_json::Value = serde_json::from_str(&captured.metadata["captured"]).unwrap();
    let batches = graph.as_array().unwrap();
    assert_eq!(batches.len(), 2);
    let reads: Vec<&str> = batches[0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|op| op["reads"].as_array().unwrap())
        .filter_map(|read| read["param"].as_str())
        .collect();
    for param in ["fc.weight", "fc.bias", "bn.weight", "bn.running_mean"] {
        assert!(reads.contains(&param), "{param} not read in {reads:?}");
    }
}

#[test]
fn a_closure_that_keeps_state_across_batches_is_recorded_again_with_its_taps() {
    // a decode loop's cache: batch k adds what batch k - 1 computed (made anew at batch 0). Under
    // capture, batch 0's state is a tensor of that capture, which batch 1's cannot read: the run is
    // recorded again from batch 0 eagerly, with the port's taps, as the same closure computes it
    let device = Device::default();
    let init = init();
    let model = init.load_module(Net::new(&device)).unwrap();
    let port = |args: &PortArgs, capture: bool| {
        let cache: std::cell::RefCell<Option<Tensor<3>>> = std::cell::RefCell::new(None);
        let inference = if capture {
            Inference::new()
        } else {
            Inference::new().with_taps_only()
        };
        inference.run(args, &init, &device, &model, |model, batch| {
            if batch.index() == 0 {
                cache.replace(None);
            }
            let x = batch.float_input::<3>("x")?;
            let mut out = model.forward(x, batch.tap())?;
            if let Some(previous) = cache.borrow().as_ref() {
                out = out + previous.clone();
            }
            cache.replace(Some(out.clone()));
            Ok(out)
        })
    };
    let restarted = args("stateful-captured.safetensors", "--batches 2");
    if let Err(e) = port(&restarted, true) {
        panic!("the stateful port failed: {e}");
    }
    let eager = args("stateful-eager.safetensors", "--batches 2");
    port(&eager, false).unwrap();
    let (restarted, eager) = (
        SafetensorsFile::read(&restarted.out).unwrap(),
        SafetensorsFile::read(&eager.out).unwrap(),
    );
    assert!(!restarted.metadata.contains_key("crashed"));
    assert!(
        restarted.metadata["capture_off"].starts_with("batch 1: "),
        "{:?}",
        restarted.metadata.get("capture_off")
    );
    for (name, tensor) in &eager.tensors {
        assert_eq!(restarted.tensors[name].bytes, tensor.bytes, "{name}");
    }
}

/// A Linear module shaped as `nn.Sequential(Linear(3, 4), ReLU(), Dropout(), Linear(4, 2))`'s two
/// Linears, either as a `Vec` (burn has no parameterless layers in it: indices 0 and 1) or as two
/// named fields.
#[derive(Module, Debug)]
struct MlpVec {
    mlp: Vec<Linear>,
}

#[derive(Module, Debug)]
struct MlpFields {
    fc1: Linear,
    fc2: Linear,
}

/// A checkpoint whose `nn.Sequential` has gaps (`mlp.0`, `mlp.3`, as torchvision builds its MLP
/// blocks) loads from `.pt` and `.safetensors` alike into a port holding PyTorch's names (two fields
/// renamed to `mlp.0` and `mlp.3`) and into one holding the Linears as a `Vec` (`mlp.0`, `mlp.1`:
/// burn-store's contiguous names): burn-store renumbers a `.pt` file's indices by default, which
/// made the first fail on `.pt` ("mlp.1.weight" unused) and the second on `.safetensors`.
#[test]
fn a_sequential_with_gaps_loads_under_pytorchs_names_and_as_a_vec() {
    let device = Device::default();
    let names = TorchNames::new()
        .rename(r"^fc1\.", "mlp.0.")
        .unwrap()
        .rename(r"^fc2\.", "mlp.3.")
        .unwrap();
    for file in ["sequential_gaps.pt", "sequential_gaps.safetensors"] {
        let path = fixture(file);
        let fields = MlpFields {
            fc1: LinearConfig::new(3, 4).init(&device),
            fc2: LinearConfig::new(4, 2).init(&device),
        };
        let fields = burnside_trace::load_pytorch_checkpoint_with(fields, &path, &names)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let list = MlpVec {
            mlp: vec![
                LinearConfig::new(3, 4).init(&device),
                LinearConfig::new(4, 2).init(&device),
            ],
        };
        let list = burnside_trace::load_pytorch_checkpoint(list, &path)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        // the same checkpoint tensors on both: PyTorch's mlp.3 is fc2 and mlp[1]
        for (a, b) in [
            (&fields.fc1.weight, &list.mlp[0].weight),
            (&fields.fc2.weight, &list.mlp[1].weight),
        ] {
            assert_eq!(a.val().into_data(), b.val().into_data(), "{file}");
        }
        assert_eq!(
            fields.fc2.weight.val().dims(),
            [4, 2],
            "{file}: burn's [in, out]"
        );
    }
}

use std::error::Error;

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::{
    HostTensor, InitFile, PortArgs, Step, Tap, TorchNames, TraceError, TraceRecorder, step_done,
};

/// A port's forward passes, recorded as a forward trace (`kind = forward`): no optimizer, no
/// gradients, on any device. The port gives one batch's forward pass; [`run`](Self::run)
/// records the model's parameters and buffers once (as loaded, before batch 0), each batch's
/// inputs, the layers the forward pass taps and the model's outputs, then writes the trace
/// to `-o`.
///
/// ```no_run
/// # use burn::nn::Linear;
/// # use burn::tensor::Device;
/// # fn port(args: burnside_trace::PortArgs, model: Linear) -> Result<(), Box<dyn std::error::Error>> {
/// use burnside_trace::{Inference, InitFile};
///
/// let device = Device::default();                  // no .autodiff(): inference (mode = inference)
/// let init = InitFile::read(&args.init)?;           // the batches PyTorch fed
/// let model = init.load_module(model)?;             // or burn-store's PytorchStore
/// Inference::new().run(&args, &init, &device, &model, |model, batch| {
///     let x = batch.float_input::<2>("x")?;        // batch k's input, bit for bit
///     let y = model.forward(x);
///     batch.tap().activation("fc", &y)?;           // a layer's output, as in Training
///     Ok(y)                                        // recorded as outputs.output
/// })?;                                             // `args.steps` batches, written to `-o`
/// # Ok(()) }
/// ```
///
/// The trace's `mode` is `inference` on a device without autodiff and `autodiff` on an autodiff
/// device (where burn's `BatchNorm` normalises with the batch's statistics, as PyTorch's
/// training mode does, unless the module's `training` flag is off).
#[derive(Debug, Clone)]
pub struct Inference {
    names: TorchNames,
    metadata: Vec<(String, String)>,
    capture: bool,
    /// Why capture is off for a run recorded again with taps only (see [`Inference::run`]).
    restarted: Option<String>,
}

/// A capture that failed at a batch after the first: the run is recorded again from batch 0 with
/// the port's taps only (the port's closure may keep state across batches, made under capture).
#[derive(Debug)]
struct Restart(String);

impl std::fmt::Display for Restart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Restart {}

impl Default for Inference {
    fn default() -> Self {
        Self {
            names: TorchNames::default(),
            metadata: Vec::new(),
            capture: true,
            restarted: None,
        }
    }
}

/// Header room for one captured operation's entry in the metadata `captured` (its JSON: place,
/// kind, settings, what it reads with shapes and parameter names; 220 bytes on average and 310 at
/// most measured on a GPT-style port), an overestimate that only pads the header.
const GRAPH_BYTES_PER_OPERATION: usize = 512;

/// A port's forward pass of one batch, as `Inference::run` takes it.
type BatchForward<'f, M, const D: usize> =
    dyn FnMut(&M, &mut Batch<'_>) -> Result<Tensor<D>, Box<dyn Error>> + 'f;

impl Inference {
    /// Forward passes recorded with burn's standard layer names (see [`TorchNames`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Name tensors with `names` (the port's renames, the same value given to
    /// [`InitFile::with_names`](crate::InitFile::with_names)).
    pub fn with_names(mut self, names: TorchNames) -> Self {
        self.names = names;
        self
    }

    /// Record the layers the forward pass taps only, running it eagerly: no graph capture (see
    /// [`run`](Self::run)).
    pub fn with_taps_only(mut self) -> Self {
        self.capture = false;
        self
    }

    /// Set a plain-string metadata key of your own in the trace (see
    /// [`TraceRecorder::with_metadata`]: the keys the recorder writes itself win).
    pub fn with_metadata(mut self, key: &str, value: &str) -> Self {
        self.metadata.push((key.to_string(), value.to_string()));
        self
    }

    /// Run `args.steps` forward passes of `model` (`--batches N` or `--steps N`) on `init`'s
    /// batches, recording each, and write the forward trace to `args.out` (atomically).
    ///
    /// `forward(model, batch)` is one batch's forward pass: read the batch with
    /// [`Batch::float_input`] / [`Batch::int_input`] (which record it; every input of the init
    /// file must be read), pass [`Batch::tap`] to the model to record its layers, and return the
    /// model's output, recorded as `outputs.output`. A model with several outputs records each
    /// with [`Batch::output`] under PyTorch's names instead; a batch that recorded a named
    /// output does not record the returned tensor.
    ///
    /// The parameters (`step0.params_before.*`) and buffers (`step0.buffers.*`, BatchNorm's
    /// running statistics) are recorded once, before batch 0, in PyTorch names and layout: the
    /// starting point the comparison checks bit for bit against PyTorch's `state_dict`.
    /// More batches than the init file holds is an error before anything runs (a file with
    /// one batch feeds it to every pass).
    ///
    /// A forward pass graph capture cannot follow past batch 0 (a key/value cache the closure keeps
    /// from batch to batch, made anew at batch 0, holds tensors of the earlier batch's capture) is
    /// recorded again from batch 0 with the port's taps only, and the run says why on one line.
    pub fn run<M: Module, const D: usize>(
        self,
        args: &PortArgs,
        init: &InitFile,
        device: &Device,
        model: &M,
        mut forward: impl FnMut(&M, &mut Batch<'_>) -> Result<Tensor<D>, Box<dyn Error>>,
    ) -> Result<(), Box<dyn Error>> {
        match self
            .clone()
            .run_with(args, init, device, model, &mut forward)
        {
            Err(error) if error.is::<Restart>() => {
                let why = error.to_string();
                eprintln!(
                    "burnside-trace: layers recorded by the port's taps only, from batch 0 again: {why}"
                );
                let again = Inference {
                    capture: false,
                    restarted: Some(why),
                    ..self
                };
                again.run_with(args, init, device, model, &mut forward)
            }
            other => other,
        }
    }

    fn run_with<M: Module, const D: usize, F>(
        self,
        args: &PortArgs,
        init: &InitFile,
        device: &Device,
        model: &M,
        forward: &mut F,
    ) -> Result<(), Box<dyn Error>>
    where
        F: FnMut(&M, &mut Batch<'_>) -> Result<Tensor<D>, Box<dyn Error>>,
    {
        let mut forward = |model: &M, batch: &mut Batch<'_>| forward(model, batch);
        let batches = args.steps;
        init.check_kind("forward")?;
        init.check_batches(batches, "--batches")?;
        let mode = if device.is_autodiff() {
            "autodiff"
        } else {
            "inference"
        };
        let mut recorder = TraceRecorder::forward(mode).with_names(self.names.clone());
        if init.full_steps().is_some() || init.layer_statistics() || init.params_statistics() {
            // what the PyTorch side recorded as statistics (`record_forward(..., statistics=..)`),
            // carried by the init file: the parameters, and the layers outside the full steps
            recorder = recorder
                .with_statistics(init.full_steps(), init.layer_statistics())
                .with_params_statistics(init.params_statistics());
        }
        for (key, value) in &self.metadata {
            recorder = recorder.with_metadata(key, value);
        }
        let entries = crate::param_paths_with(model, recorder.names());
        let capture = if self.capture {
            crate::capture::capturable(device)
        } else if let Some(why) = &self.restarted {
            Err(why.clone())
        } else {
            Err("taps only (Inference::with_taps_only)".to_string())
        };
        if let Err(why) = &capture
            && self.capture
        {
            eprintln!("burnside-trace: layers recorded by the port's taps only: {why}");
        }
        let mut capture = capture;
        let mut graphs: Vec<String> = Vec::new();
        let mut differs: Vec<String> = Vec::new();
        // batch k's forward pass under graph capture, to replay on Flex
        let capture_one = |k: usize, forward: &mut BatchForward<'_, M, D>| {
            crate::capture::capture_pass(
                model,
                |moved, capture_device, deferred| {
                    let mut batch = Batch {
                        step: Step::unrecorded(k, init, capture_device),
                        deferred: Some(deferred),
                    };
                    forward(moved, &mut batch)
                },
                |output: &Tensor<D>| crate::capture::tensor_id(output),
            )
        };
        // Batch 0 is captured before the file is started (capture reads the model, moves nothing
        // and computes nothing): its operations size the header's room for every batch (an
        // entry and the graph's JSON of each), so the finish does not copy the file to make room
        // for a header that outgrew the guess.
        let mut first = match capture {
            Ok(_) if batches > 0 && init.check_int_inputs(0, device).is_ok() => {
                Some(capture_one(0, &mut forward))
            }
            _ => None,
        };
        // Each tensor goes to the file as it is recorded; the estimate (the parameters and
        // buffers once, per batch its inputs, batch 0's operations and a tap per parameter, or
        // that guess alone, and a few outputs) sizes the header's room.
        let params = entries.len();
        let (captured, graph_bytes) = match &first {
            Some(Ok(pending)) => {
                let ops = pending.operations();
                (ops + params, ops.saturating_mul(GRAPH_BYTES_PER_OPERATION))
            }
            _ => (params, 0),
        };
        let per_batch = init.input_names().len() + captured + 4;
        recorder.stream_to_reserving(
            &args.out,
            params + batches.saturating_mul(per_batch),
            batches.saturating_mul(graph_bytes),
        )?;
        recorder.params_and_buffers(0, model)?;
        step_done(0, batches);
        for k in 0..batches {
            // an integer input the device cannot hold is left to the eager pass to refuse
            let capturable = capture.is_ok() && init.check_int_inputs(k, device).is_ok();
            if capturable && capture == Ok(crate::capture::Mode::Replace) {
                let pending = first.take().unwrap_or_else(|| capture_one(k, &mut forward));
                // each operation's output goes to the file as the replay makes it
                let mut written = 0usize;
                let replayed = pending.and_then(|pending| {
                    pending.replay(
                        &entries,
                        Some(&mut |name: String, tensor: HostTensor| {
                            written += 1;
                            recorder.put_captured(k, &name, tensor)
                        }),
                    )
                });
                if let Err(why) = &replayed
                    && written > 0
                {
                    return Err(TraceError::Setup(format!(
                        "the replay of batch {k}'s captured forward pass failed after recording \
                         {written} of its operations: {why}; record the port's taps alone with \
                         `Inference::with_taps_only()`"
                    ))
                    .into());
                }
                match replayed {
                    Ok(replayed) => {
                        let crashed = replayed.crashed.clone();
                        graphs.push(replayed.graph.clone());
                        recorder.replayed(k, replayed)?;
                        if let Some(crash) = crashed {
                            // what ran before the crash is compared: the trace is written
                            recorder
                                .insert_metadata("captured", &format!("[{}]", graphs.join(",")));
                            // one line: metadata strings are printable text
                            let said = crash.split_whitespace().collect::<Vec<_>>().join(" ");
                            recorder.insert_metadata("crashed", &format!("batch {k}: {said}"));
                            recorder.write(&args.out)?;
                            return Err(TraceError::Crashed(format!(
                                "the forward pass of batch {k} failed: {crash} (the trace of what \
                                 ran before it is written to {})",
                                args.out.display()
                            ))
                            .into());
                        }
                        self.check_inputs(&recorder, init, k)?;
                        step_done(k + 1, batches);
                        continue;
                    }
                    Err(why) if k > 0 => {
                        // batches before it ran under capture only: a closure that keeps state across
                        // batches holds what they made there, so the run starts again eagerly
                        return Err(Restart(format!("batch {k}: {why}")).into());
                    }
                    Err(why) => {
                        eprintln!("burnside-trace: layers recorded by the port's taps only: {why}");
                        capture = Err(why);
                    }
                }
            }
            // beside an autodiff forward: captured first, before the eager forward moves a
            // BatchNorm's running statistics (training mode)
            let mut beside = None;
            if capturable && capture == Ok(crate::capture::Mode::Beside) {
                let replayed = first
                    .take()
                    .unwrap_or_else(|| capture_one(k, &mut forward))
                    .and_then(|pending| pending.replay(&entries, None));
                match replayed {
                    Ok(replayed) if replayed.crashed.is_none() => beside = Some(replayed),
                    Ok(replayed) => {
                        let why = replayed.crashed.unwrap_or_default();
                        capture = Err(format!(
                            "the forward pass failed under graph capture: {why}"
                        ));
                    }
                    Err(why) => capture = Err(why),
                }
            }
            let mut batch = Batch {
                step: recorder.step(k, init, device),
                deferred: None,
            };
            let output = forward(model, &mut batch)?;
            self.check_inputs(&recorder, init, k)?;
            if !recorder.has_output(k) {
                recorder.output(k, "output", &output)?;
            }
            if let Some(replayed) = beside {
                let eager = HostTensor::of(&output)?;
                if replayed.output.as_ref().map(|o| &o.bytes) != Some(&eager.bytes) {
                    differs.push(k.to_string());
                }
                graphs.push(replayed.graph.clone());
                recorder.replayed_layers(k, replayed)?;
            }
            step_done(k + 1, batches);
        }
        if !differs.is_empty() {
            // the forward pass computes otherwise on the autodiff device than without autodiff
            // (burn's BatchNorm takes the batch statistics there): its captured layers are not the
            // port's, and the comparison measures the difference instead
            recorder.insert_metadata("captured_differs", &differs.join(","));
        }
        if !graphs.is_empty() {
            recorder.insert_metadata("captured", &format!("[{}]", graphs.join(",")));
        }
        if let Err(why) = &capture {
            // why the layers are the taps' only, for the comparison to say
            recorder.insert_metadata("capture_off", why);
        }
        recorder.write(&args.out)?;
        Ok(())
    }

    /// Refuse a batch that did not record every input of the init file.
    fn check_inputs(
        &self,
        recorder: &TraceRecorder,
        init: &InitFile,
        k: usize,
    ) -> Result<(), TraceError> {
        if let Some(name) = init
            .input_names()
            .into_iter()
            .find(|name| !recorder.contains(&format!("step{k}.inputs.{name}")))
        {
            return Err(TraceError::Incomplete(format!(
                "batch {k} did not record input `{name}`: read it with \
                 `batch.float_input(\"{name}\")` or `batch.int_input(\"{name}\")` (or record \
                 what the port fed with `batch.record_input`)"
            )));
        }
        Ok(())
    }
}

/// One forward pass of an [`Inference`] run, as the port's closure sees it: the batch PyTorch
/// fed, read and recorded, the tap that records layer outputs, named outputs, and what PyTorch
/// fed each module (layer isolation).
#[derive(Debug)]
pub struct Batch<'a> {
    step: Step<'a>,
    /// Under graph capture: what to record once the replay has the values.
    deferred: Option<&'a mut crate::capture::Deferred>,
}

impl Batch<'_> {
    /// The batch's number, from 0.
    pub fn index(&self) -> usize {
        self.step.index()
    }

    /// The device the forward passes run on.
    pub fn device(&self) -> &Device {
        self.step.device()
    }

    /// The float input `name` of the batch PyTorch fed in this forward pass, recorded as its
    /// input (`step{k}.inputs.{name}`).
    pub fn float_input<const D: usize>(&mut self, name: &str) -> Result<Tensor<D>, TraceError> {
        let tensor = self.step.float_input(name)?;
        self.defer_input(name, || crate::capture::tensor_id(&tensor))?;
        Ok(tensor)
    }

    /// The integer input `name` (token ids, class labels) of this batch, recorded.
    pub fn int_input<const D: usize>(&mut self, name: &str) -> Result<Tensor<D, Int>, TraceError> {
        let tensor = self.step.int_input(name)?;
        self.defer_input(name, || crate::capture::int_tensor_id(&tensor))?;
        Ok(tensor)
    }

    /// Under graph capture: the batch's input `name`, as the file holds it, to record once the
    /// replay has run, with the id of the capture's tensor made from it (`id`).
    fn defer_input(
        &mut self,
        name: &str,
        id: impl FnOnce() -> Option<burn_ir::TensorId>,
    ) -> Result<(), TraceError> {
        if let Some(deferred) = self.deferred.as_deref_mut() {
            let data = self
                .step
                .init()
                .input_at(self.step.index(), name)?
                .to_data();
            deferred.inputs.push((name.to_string(), data, id()));
        }
        Ok(())
    }

    /// Record an input the port got some other way as this batch's input `name`.
    pub fn record_input(&mut self, name: &str, data: TensorData) -> Result<(), TraceError> {
        if let Some(deferred) = self.deferred.as_deref_mut() {
            deferred.inputs.push((name.to_string(), data, None));
            return Ok(());
        }
        self.step.record_input(name, data)
    }

    /// Where the model's forward pass records its layers' outputs ([`Tap::activation`], as
    /// `step{k}.activations.{name}`, in the order the forward pass runs them).
    pub fn tap(&mut self) -> Tap<'_> {
        if let Some(deferred) = self.deferred.as_deref_mut() {
            return Tap::deferred(&mut deferred.taps);
        }
        self.step.tap()
    }

    /// Record `output` as the model's output `name` (`step{k}.outputs.{name}`), PyTorch's name
    /// for it: `0`, `1`, ... for a tuple, a dict's keys, joined with `.` when nested
    /// (`past.0.1`). Once a batch records a named output, the tensor its closure returns is not
    /// recorded: record every output this way, `output` included if the model has one by that
    /// name.
    pub fn output<const D: usize>(
        &mut self,
        name: &str,
        output: &Tensor<D>,
    ) -> Result<(), TraceError> {
        if let Some(deferred) = self.deferred.as_deref_mut() {
            let id = crate::capture::tensor_id(output)
                .ok_or_else(|| crate::capture::not_captured(&format!("output `{name}`")))?;
            deferred.outputs.push((name.to_string(), id));
            return Ok(());
        }
        let index = self.index();
        match self.step.recorder_mut() {
            Some(recorder) => recorder.output(index, name, output),
            None => Ok(()),
        }
    }

    /// What PyTorch fed module `module` (its module path: `encoder.gru`) in this forward pass,
    /// from the init file's `step{k}.layer_inputs.{module}` ([`InitFile::layer_input_at`]), as
    /// a float tensor of rank `D`, bit for bit. Feed it to the burn layer to judge the layer on
    /// PyTorch's own input, without the drift of the layers before it. Not recorded as an input.
    pub fn layer_input<const D: usize>(&self, module: &str) -> Result<Tensor<D>, TraceError> {
        self.step
            .init()
            .float_layer_input_at(self.index(), module, self.device())
    }

    /// What PyTorch fed module `module` in this forward pass, as an integer tensor of rank `D`
    /// (an embedding's token ids); see [`layer_input`](Self::layer_input).
    pub fn int_layer_input<const D: usize>(
        &self,
        module: &str,
    ) -> Result<Tensor<D, Int>, TraceError> {
        self.step
            .init()
            .int_layer_input_at(self.index(), module, self.device())
    }
}

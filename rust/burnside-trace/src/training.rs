use std::collections::HashMap;
use std::error::Error;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::{GradientsAccumulator, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::{
    ClipGradNorm, InitFile, OptimizerSpec, PortArgs, Tap, TorchNames, TraceError, TraceRecorder,
    param_paths_with, step_done,
};

/// A port's training loop, with every stage recorded: the port gives the forward pass and the
/// loss of one step, [`run`](Self::run) does the rest as PyTorch's loop does it (`backward`,
/// `clip_grad_norm_` if declared, each parameter group's optimizer step with the declared
/// learning rate) and records inputs, parameters before and after, logits, loss, gradients,
/// optimizer state, the final loss and the progress, then writes the trace to `-o`.
///
/// The settings are given once, here, and both recorded and used, so the trace cannot claim
/// one thing while the loop does another, and no stage can be forgotten:
///
/// ```no_run
/// # use burn::nn::{Linear, loss::CrossEntropyLossConfig};
/// # use burn::tensor::Device;
/// # fn port(args: burnside_trace::PortArgs, model: Linear) -> Result<(), Box<dyn std::error::Error>> {
/// use burnside_trace::{InitFile, OptimizerSpec, Training};
///
/// let device = Device::default().autodiff();
/// let init = InitFile::read(&args.init)?;
/// let model = init.load_module(model)?;
/// let ce = CrossEntropyLossConfig::new().init(&device);
/// Training::new(OptimizerSpec::adam(1e-3))         // torch.optim.Adam(model.parameters(), lr=1e-3)
///     .with_clip_grad_norm(1.0)                    // clip_grad_norm_(model.parameters(), 1.0)
///     .with_loss_fn("cross_entropy")               // record(..., loss_fn=F.cross_entropy)
///     .run(&args, &init, &device, model, |model, step| {
///         let x = step.float_input::<2>("x")?;     // the batch PyTorch fed at this step
///         let y = step.int_input::<1>("y")?;
///         let logits = model.forward(x);           // step.tap() records layers, see Tap
///         let loss = ce.forward(logits.clone(), y);
///         Ok((logits, loss))
///     })?;
/// # Ok(()) }
/// ```
///
/// The closure is also called once after the last step, with nothing recorded, for the loss of
/// the trained model on the last step's batch (PyTorch's `loss_after`).
///
/// With [`with_accumulation(M)`](Self::with_accumulation) the closure is one *micro-batch*'s
/// forward pass and loss, called M times per step, and the gradients of the M losses are summed
/// with burn's `GradientsAccumulator` before one optimizer step, as PyTorch's loop that calls
/// `backward()` M times between `zero_grad()` and `optimizer.step()`.
pub struct Training {
    accumulate: usize,
    optimizer: OptimizerSpec,
    clip: Option<ClipGradNorm>,
    groups: Vec<(OptimizerSpec, Vec<String>)>,
    schedule: Option<Box<dyn Fn(usize) -> f64>>,
    recorder: TraceRecorder,
}

/// What [`Training::run`] trained: the model, each step's loss and the final loss.
#[derive(Debug)]
pub struct Trained<M> {
    /// The model after the last step.
    pub model: M,
    /// The loss of each step.
    pub losses: Vec<f32>,
    /// The loss of the trained model on the last step's batch.
    pub loss_after: f32,
}

impl Training {
    /// A loop that trains with `optimizer` (PyTorch's defaults: see [`OptimizerSpec`]).
    pub fn new(optimizer: OptimizerSpec) -> Self {
        Self {
            recorder: TraceRecorder::new(optimizer.clone()),
            accumulate: 1,
            optimizer,
            clip: None,
            groups: Vec::new(),
            schedule: None,
        }
    }

    /// Clip as `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` between
    /// `backward` and the optimizer step (one factor from all gradients' joint norm, before the
    /// gradients are split into parameter groups). The trace keeps the unclipped gradients,
    /// as PyTorch's does.
    pub fn with_clip_grad_norm(mut self, max_norm: f32) -> Self {
        let clip = ClipGradNorm::new(max_norm);
        self.clip = Some(clip);
        self.recorder = self.recorder.with_clip_grad_norm(clip);
        self
    }

    /// Accumulate gradients over `micro_batches` micro-batches per optimizer step, as
    /// `burnside.torch.record(..., accumulate=M)` records PyTorch's loop: each step calls the
    /// closure once per micro-batch ([`Step::micro`] is its number; the `Step` reads batch
    /// `k * M + j` of the init file, or its one batch), calls `backward` on each loss as the
    /// closure returns it and sums the gradients with burn's `GradientsAccumulator`
    /// (`accumulator.accumulate(&model, grads)`), then clips (if declared) and takes one optimizer
    /// step on `accumulator.grads()`. A PyTorch loop that divides each loss by M does it in its
    /// `loss_fn`: divide the closure's loss by M too, never the accumulated gradients. The trace
    /// records each micro-batch's inputs, output and loss (`step{k}.micro_*.{j}`), the step's
    /// loss as their sum, the accumulated gradients, and metadata `accumulate`; layer taps are
    /// off. 1 is a loop without accumulation.
    pub fn with_accumulation(mut self, micro_batches: usize) -> Self {
        self.accumulate = micro_batches.max(1);
        self.recorder = self.recorder.with_accumulation(micro_batches);
        self
    }

    /// A parameter group, as one of PyTorch's `param_groups`: the parameters named `params`
    /// (PyTorch names, e.g. `fc1.bias`) are trained with `spec`, the others with the loop's
    /// own optimizer. Typical: `.with_group(OptimizerSpec::adamw(lr).with_weight_decay(0.0),
    /// &["ln.weight", "ln.bias"])`. Each group gets its own burn optimizer and its own part of
    /// the (clipped) gradients; under a schedule its rate scales as the main group's does.
    pub fn with_group(mut self, spec: OptimizerSpec, params: &[&str]) -> Self {
        self.recorder = self.recorder.with_group(spec.clone(), params);
        self.groups
            .push((spec, params.iter().map(|p| p.to_string()).collect()));
        self
    }

    /// A learning-rate schedule: `lr(step)` is the rate of step `step` (0-based), as PyTorch's
    /// scheduler gives `optimizer.param_groups[0]["lr"]` before that step's `optimizer.step()`.
    /// E.g. a linear warmup over `w` steps: `move |k| 1e-3 * ((k + 1) as f64 / w as f64).min(1.0)`.
    pub fn with_lr_schedule(mut self, lr: impl Fn(usize) -> f64 + 'static) -> Self {
        self.schedule = Some(Box::new(lr));
        self
    }

    /// Name tensors with `names` (the port's renames, the same value given to
    /// [`InitFile::with_names`](crate::InitFile::with_names)).
    pub fn with_names(mut self, names: TorchNames) -> Self {
        self.recorder = self.recorder.with_names(names);
        self
    }

    /// Declare the loss the closure computes, by the name the PyTorch recorder writes for its
    /// `loss_fn`, which `name` must equal: the Python loss function's `__name__` (`cross_entropy`
    /// for `nn.functional.cross_entropy`) or a loss module's class name (`SmoothL1Loss`). It is the
    /// trace's `loss_fn` ([`TraceRecorder::with_loss_fn`]).
    pub fn with_loss_fn(mut self, name: &str) -> Self {
        self.recorder = self.recorder.with_loss_fn(name);
        self
    }

    /// Set a plain-string metadata key of your own in the trace (see
    /// [`TraceRecorder::with_metadata`]).
    pub fn with_metadata(mut self, key: &str, value: &str) -> Self {
        self.recorder = self.recorder.with_metadata(key, value);
        self
    }

    /// Train `args.steps` steps of `model` from `init`'s batches, recording every stage, and
    /// write the trace to `args.out`. `forward_loss(model, step)` is one step's forward pass
    /// and loss: read the batch with [`Step::float_input`] / [`Step::int_input`] (which record
    /// it), pass [`Step::tap`] to the model's forward to record its layers, and return the
    /// model's output and the loss.
    pub fn run<M: Module, const D: usize>(
        mut self,
        args: &PortArgs,
        init: &InitFile,
        device: &Device,
        mut model: M,
        mut forward_loss: impl FnMut(
            &M,
            &mut Step<'_>,
        ) -> Result<(Tensor<D>, Tensor<1>), Box<dyn Error>>,
    ) -> Result<Trained<M>, Box<dyn Error>> {
        init.check_kind("training")?;
        // the steps the PyTorch side recorded in full, the others as statistics, as it did
        if init.full_steps().is_some() || init.layer_statistics() {
            self.recorder = self
                .recorder
                .with_statistics(init.full_steps(), init.layer_statistics());
        }
        if let Some(spec) = std::iter::once(&self.optimizer)
            .chain(self.groups.iter().map(|(spec, _)| spec))
            .find(|spec| matches!(spec, OptimizerSpec::Lbfgs { .. }))
        {
            return Err(TraceError::Setup(format!(
                "Training steps each optimizer through burn's ModuleOptimizer; {} steps the whole model \
                 with a closure: write the loop call by call with OptimizerSpec::init_lbfgs (rust/train-step \
                 does)",
                spec.torch_name()
            ))
            .into());
        }
        let group_of = self.group_of(&model)?;
        let mut optims: Vec<ModuleOptimizer> = std::iter::once(&self.optimizer)
            .chain(self.groups.iter().map(|(spec, _)| spec))
            .map(OptimizerSpec::init)
            .collect();
        let base = self.optimizer.lr();
        let mut losses = Vec::with_capacity(args.steps);
        // Each tensor goes to the file as it is recorded (a large model's steps need not fit in
        // memory); the estimate sizes the header's room.
        let estimate = training_estimate(&model, self.recorder.names(), init, args.steps)
            + args.steps.saturating_mul(self.accumulate - 1) * (init.input_names().len() + 2);
        self.recorder.stream_to(&args.out, estimate)?;
        step_done(0, args.steps);
        let m = self.accumulate;
        for k in 0..args.steps {
            let recorder = &mut self.recorder;
            recorder.params_before(k, &model)?;
            let grads = if m == 1 {
                // step 0's forward pass captured without autodiff (before the eager one moves a
                // BatchNorm's running statistics): its layers are recorded where its output is the
                // eager one bit for bit (no BatchNorm in training mode, no dropout)
                // (an integer input the device cannot hold is left to the eager pass to refuse)
                let beside = if k == 0
                    && crate::capture::capturable(device).is_ok()
                    && init.check_int_inputs(0, device).is_ok()
                {
                    let entries = crate::param_paths_with(&model, recorder.names());
                    crate::capture::capture_batch(
                        &model,
                        &entries,
                        |moved, capture_device, _deferred| {
                            forward_loss(moved, &mut Step::unrecorded(0, init, capture_device))
                        },
                        |(output, _): &(Tensor<D>, Tensor<1>)| crate::capture::tensor_id(output),
                    )
                    .ok()
                    .filter(|replayed| replayed.crashed.is_none())
                } else {
                    None
                };
                let (output, loss) = forward_loss(&model, &mut recorder.step(k, init, device))?;
                check_inputs(recorder, init, k, None)?;
                if let Some(replayed) = beside {
                    let eager = crate::HostTensor::of(&output)?;
                    // an autodiff forward runs some operations through other kernels than a plain
                    // one (a Linear's bias add): the replay is the port's forward where its output is
                    // the eager one within rounding; a BatchNorm in training mode or dropout moves it
                    // by far more, and then the comparison leaves its layers out
                    let apart = replayed
                        .output
                        .as_ref()
                        .map_or(f64::INFINITY, |o| relative_distance(o, &eager));
                    if apart > CAPTURE_ROUNDING {
                        recorder.insert_metadata("captured_differs", "0");
                    } else if apart > 0.0 {
                        recorder.insert_metadata("captured_rounding", &format!("{apart:.3e}"));
                    }
                    let graph = replayed.graph.clone();
                    recorder.replayed_layers(0, replayed)?;
                    recorder.insert_metadata("captured", &format!("[{graph}]"));
                }
                recorder.logits(k, &output)?;
                recorder.loss(k, &loss)?;
                losses.push(loss.clone().into_scalar::<f32>());
                GradientsParams::from_grads(loss.backward(), &model)
            } else {
                // PyTorch: zero_grad(), then loss.backward() per micro-batch into the same .grad
                let mut accumulator = GradientsAccumulator::<M>::new();
                let mut total: Option<Tensor<1>> = None;
                for j in 0..m {
                    let (output, loss) =
                        forward_loss(&model, &mut recorder.micro_step(k, j, init, device))?;
                    check_inputs(recorder, init, k, Some(j))?;
                    recorder.micro_logits(k, j, &output)?;
                    recorder.micro_loss(k, j, &loss)?;
                    let value = loss.clone().detach();
                    total = Some(match total {
                        None => value,
                        Some(sum) => sum + value,
                    });
                    accumulator
                        .accumulate(&model, GradientsParams::from_grads(loss.backward(), &model));
                }
                let total = total.expect("at least two micro-batches");
                recorder.loss(k, &total)?;
                losses.push(total.into_scalar::<f32>());
                accumulator.grads()
            };
            recorder.grads(k, &model, &grads)?;
            let grads = match self.clip {
                Some(clip) => clip.apply(&model, grads),
                None => grads,
            };
            let lr = match &self.schedule {
                Some(schedule) => {
                    let lr = schedule(k);
                    recorder.lr(k, lr);
                    lr
                }
                None => base,
            };
            let parts = split(&model, grads, &group_of, optims.len());
            for (i, (optim, part)) in optims.iter_mut().zip(parts).enumerate() {
                let group_lr = match i {
                    0 => lr,
                    // a group's rate scales with the schedule as the main group's does
                    _ if base == 0.0 => self.groups[i - 1].0.lr(),
                    _ => self.groups[i - 1].0.lr() * lr / base,
                };
                model = optim.step(group_lr, model, part);
            }
            recorder.params_after(k, &model)?;
            for optim in &optims {
                recorder.optim(k, &model, optim)?;
            }
            step_done(k + 1, args.steps);
        }
        let last = args.steps - 1;
        let mut loss_after: Option<Tensor<1>> = None;
        for j in 0..m {
            let mut step = Step::unrecorded(last, init, device);
            if m > 1 {
                step = step.micro(j, m);
            }
            let (_, loss) = forward_loss(&model, &mut step)?;
            let loss = loss.detach();
            loss_after = Some(match loss_after {
                None => loss,
                Some(sum) => sum + loss,
            });
        }
        let loss_after = loss_after.expect("at least one forward pass");
        self.recorder.loss_after(last, &loss_after)?;
        self.recorder.write(&args.out)?;
        Ok(Trained {
            model,
            losses,
            loss_after: loss_after.into_scalar(),
        })
    }

    /// Each grouped parameter's group (1-based: 0 is the main optimizer's), by `ParamId`.
    fn group_of<M: Module>(&self, model: &M) -> Result<HashMap<ParamId, usize>, TraceError> {
        let entries = param_paths_with(model, self.recorder.names());
        let mut group_of = HashMap::new();
        for (i, (_, params)) in self.groups.iter().enumerate() {
            for name in params {
                let ids: Vec<ParamId> = entries
                    .iter()
                    .filter(|e| !e.buffer && &e.torch == name)
                    .map(|e| e.id)
                    .collect();
                if ids.is_empty() {
                    let known: Vec<&str> = entries
                        .iter()
                        .filter(|e| !e.buffer)
                        .map(|e| e.torch.as_str())
                        .collect();
                    return Err(TraceError::Setup(format!(
                        "with_group: `{name}` is no parameter of the model (its PyTorch names: {})",
                        known.join(", ")
                    )));
                }
                for id in ids {
                    group_of.insert(id, i + 1);
                }
            }
        }
        Ok(group_of)
    }
}

/// An error naming the first input of the batch that step `k` (its micro-batch `micro`) did not
/// record through its `Step`.
fn check_inputs(
    recorder: &TraceRecorder,
    init: &InitFile,
    k: usize,
    micro: Option<usize>,
) -> Result<(), TraceError> {
    let name_of = |name: &str| match micro {
        Some(j) => format!("step{k}.micro_inputs.{j}.{name}"),
        None => format!("step{k}.inputs.{name}"),
    };
    if let Some(name) = init
        .input_names()
        .into_iter()
        .find(|name| !recorder.contains(&name_of(name)))
    {
        let which = match micro {
            Some(j) => format!("step {k}'s micro-batch {j}"),
            None => format!("step {k}"),
        };
        return Err(TraceError::Incomplete(format!(
            "{which} did not record input `{name}` of the batch: read it with \
             `step.float_input(\"{name}\")` or `step.int_input(\"{name}\")` (or record what \
             the port fed with `step.record_input`)"
        )));
    }
    Ok(())
}

/// How many tensors a training trace of `steps` steps of `model` holds, about: per step the
/// inputs, the parameters before and after, their gradients, up to three optimizer slots each
/// (Adam's `exp_avg`, `exp_avg_sq`, `step`), the buffers, a guess of one tapped layer per
/// parameter, the logits and the loss.
fn training_estimate<M: Module>(
    model: &M,
    names: &TorchNames,
    init: &InitFile,
    steps: usize,
) -> usize {
    let entries = param_paths_with(model, names);
    let buffers = entries.iter().filter(|e| e.buffer).count();
    let params = entries.len() - buffers;
    let per_step = init.input_names().len() + params * (3 + 3 + 1) + buffers + 3;
    steps.saturating_mul(per_step)
}

/// `grads` cut into one part per optimizer: `parts[0]` the main group's, `parts[g]` group g's.
fn split<M: Module>(
    model: &M,
    grads: GradientsParams,
    group_of: &HashMap<ParamId, usize>,
    groups: usize,
) -> Vec<GradientsParams> {
    if groups == 1 {
        return vec![grads];
    }
    let mut splitter = Splitter {
        from: grads,
        parts: (1..groups).map(|_| GradientsParams::new()).collect(),
        group_of,
    };
    model.visit(&mut splitter);
    std::iter::once(splitter.from)
        .chain(splitter.parts)
        .collect()
}

/// Moves each grouped parameter's gradient into its group's part (rank by rank, the only way
/// `GradientsParams` hands tensors out).
struct Splitter<'a> {
    from: GradientsParams,
    parts: Vec<GradientsParams>,
    group_of: &'a HashMap<ParamId, usize>,
}

impl ModuleVisitor for Splitter<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(&group) = self.group_of.get(&param.id)
            && let Some(grad) = self.from.remove::<D>(param.id)
        {
            self.parts[group - 1].register(param.id, grad);
        }
    }
}

/// How far (relative L2) step 0's forward pass replayed without autodiff may be from the eager one
/// and still be the port's: rounding of other kernels (measured 1.1e-7 on the transformer example),
/// not a BatchNorm's batch statistics or a dropout mask (order 1e-1).
const CAPTURE_ROUNDING: f64 = 1e-5;

/// The relative L2 distance of two f32 tensors of one shape (infinite for other shapes or dtypes).
fn relative_distance(a: &crate::HostTensor, b: &crate::HostTensor) -> f64 {
    let (Some(a), Some(b)) = (a.to_f32(), b.to_f32()) else {
        return f64::INFINITY;
    };
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(&b) {
        diff += (f64::from(*x) - f64::from(*y)).powi(2);
        norm += f64::from(*y).powi(2);
    }
    diff.sqrt() / norm.sqrt().max(f64::MIN_POSITIVE)
}

/// One step of a [`Training`] loop, as the port's forward pass sees it: the step's batch, read
/// and recorded, and the tap that records layer outputs.
#[derive(Debug)]
pub struct Step<'a> {
    index: usize,
    /// Gradient accumulation: the micro-batch's number and the micro-batches per step.
    micro: Option<(usize, usize)>,
    init: &'a InitFile,
    device: &'a Device,
    /// `None` for the forward pass after training, which records nothing.
    recorder: Option<&'a mut TraceRecorder>,
}

impl<'a> Step<'a> {
    /// Step `index` of a loop recorded call by call ([`TraceRecorder::step`] gives the recorded
    /// one): the batch read from `init`, nothing recorded, the tap off (a forward pass after
    /// training, for `loss_after`).
    pub fn unrecorded(index: usize, init: &'a InitFile, device: &'a Device) -> Self {
        Step {
            index,
            micro: None,
            init,
            device,
            recorder: None,
        }
    }

    /// Step `index` recording into `recorder` (see [`TraceRecorder::step`]).
    pub(crate) fn recorded(
        index: usize,
        init: &'a InitFile,
        device: &'a Device,
        recorder: &'a mut TraceRecorder,
    ) -> Self {
        Step {
            index,
            micro: None,
            init,
            device,
            recorder: Some(recorder),
        }
    }

    /// Micro-batch `micro` of this step, in a loop that accumulates `micro_batches` per optimizer
    /// step: the batch read is the init file's batch `index * micro_batches + micro` (its one
    /// batch when it holds one), recorded as `step{k}.micro_inputs.{micro}.{name}`; the tap is off.
    /// [`TraceRecorder::micro_step`] gives the recorded one; `Step::unrecorded(k, ..).micro(j, m)`
    /// the one a loop's `loss_after` reads.
    pub fn micro(mut self, micro: usize, micro_batches: usize) -> Self {
        self.micro = Some((micro, micro_batches));
        self
    }

    /// The micro-batch's number in its step (`None` in a loop without accumulation).
    pub fn micro_index(&self) -> Option<usize> {
        self.micro.map(|(j, _)| j)
    }

    /// The init file's batch this step (micro-batch) reads.
    fn batch(&self) -> usize {
        match self.micro {
            Some((j, m)) => self.index * m + j,
            None => self.index,
        }
    }

    /// The init file the step's batch is read from.
    pub(crate) fn init(&self) -> &'a InitFile {
        self.init
    }

    /// The recorder this step records into (`None` for an unrecorded step).
    pub(crate) fn recorder_mut(&mut self) -> Option<&mut TraceRecorder> {
        self.recorder.as_deref_mut()
    }

    /// The step's number, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The device the loop trains on.
    pub fn device(&self) -> &Device {
        self.device
    }

    /// The float input `name` of the batch PyTorch fed at this step, recorded as this step's.
    pub fn float_input<const D: usize>(&mut self, name: &str) -> Result<Tensor<D>, TraceError> {
        let tensor = self
            .init
            .float_input_at::<D>(self.batch(), name, self.device)?;
        self.record_input(name, tensor.to_data())?;
        Ok(tensor)
    }

    /// The integer input `name` (class labels, token ids) of this step's batch, recorded.
    pub fn int_input<const D: usize>(&mut self, name: &str) -> Result<Tensor<D, Int>, TraceError> {
        let tensor = self
            .init
            .int_input_at::<D>(self.batch(), name, self.device)?;
        self.record_input(name, tensor.to_data())?;
        Ok(tensor)
    }

    /// Record an input the port got some other way (made by the port itself, or read from
    /// another step's batch) as this step's input `name`.
    pub fn record_input(&mut self, name: &str, data: TensorData) -> Result<(), TraceError> {
        match (self.recorder.as_deref_mut(), self.micro) {
            (Some(recorder), Some((j, _))) => recorder.micro_input(self.index, j, name, data),
            (Some(recorder), None) => recorder.input(self.index, name, data),
            (None, _) => Ok(()),
        }
    }

    /// Record one more output of the step's forward pass as `step{k}.outputs.{name}`, beside the
    /// output the step's closure returns (recorded as `logits`): a model whose PyTorch forward
    /// returns a tuple or a dict (a VAE's reconstruction, `mu` and `logvar`) is recorded by
    /// `burnside.torch.record` under the names `0`, `1`, ... or the dict's keys, its first output
    /// also as `logits`. Nothing is recorded for the forward pass after training.
    ///
    /// ```ignore
    /// let (recon, mu, logvar) = model.forward(x);
    /// step.output("1", &mu)?;
    /// step.output("2", &logvar)?;
    /// Ok((recon, loss)) // `logits` and, as PyTorch's `outputs.0`, the same tensor
    /// ```
    pub fn output<const D: usize>(
        &mut self,
        name: &str,
        tensor: &Tensor<D>,
    ) -> Result<(), TraceError> {
        match self.recorder.as_deref_mut() {
            Some(recorder) if self.micro.is_none() => recorder.output(self.index, name, tensor),
            _ => Ok(()),
        }
    }

    /// Where the model's forward pass records its layers' outputs ([`Tap::activation`]); off
    /// for the forward pass after training.
    pub fn tap(&mut self) -> Tap<'_> {
        match self.recorder.as_deref_mut() {
            Some(recorder) if self.micro.is_none() => recorder.tap(self.index),
            _ => Tap::off(),
        }
    }
}

//! The burn side of burnside: load the starting point PyTorch exported and record what a burn
//! training loop computes, in the burnside trace format (`docs/trace-format.md`: version 1, or 2
//! when a step's `params_before` is written as an alias of the step before's `params_after`, 3
//! when tensors are recorded as their [`Statistics`] only), written to the file as it is
//! recorded. An init file whose PyTorch trace kept only some steps in full
//! ([`InitFile::full_steps`], [`InitFile::layer_statistics`]) has [`Training`] record the same
//! steps in full and the others as statistics.
//!
//! A port's `main` is the check contract ([`run_port`]), loading ([`InitFile`]) and one
//! [`Training`] loop, which records every stage itself:
//!
//! ```no_run
//! # use burn::nn::{Linear, loss::CrossEntropyLossConfig};
//! # use burn::tensor::Device;
//! # fn new_model(device: &Device) -> Linear { burn::nn::LinearConfig::new(4, 3).init(device) }
//! use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Training};
//!
//! fn main() {
//!     // parses the contract's arguments and runs `port`; its error is printed as the last line
//!     // of stderr, which `burnside check` reports, and exits 1 (2 for a usage error)
//!     burnside_trace::run_port("my-port", port);
//! }
//!
//! fn port(args: PortArgs) -> Result<(), Box<dyn std::error::Error>> {
//!     args.finish()?;
//!     let device = Device::default().autodiff();
//!     let init = InitFile::read(&args.init)?;
//!     let model = init.load_module(new_model(&device))?; // PyTorch names and layout -> burn
//!     let ce = CrossEntropyLossConfig::new().init(&device);
//!     Training::new(OptimizerSpec::sgd(0.1))
//!         .with_loss_fn("cross_entropy") // the PyTorch loop's loss_fn
//!         .run(&args, &init, &device, model, |model, step| {
//!             let x = step.float_input::<2>("x")?; // the batch, bit for bit
//!             let logits = model.forward(x);
//!             let loss = ce.forward(logits.clone(), step.int_input::<1>("y")?);
//!             Ok((logits, loss))
//!         })?; // trains `args.steps` steps and writes the trace to `-o`
//!     Ok(())
//! }
//! ```
//!
//! A port of a pretrained model is checked on its forward passes alone, on any device
//! ([`Inference`]: a forward trace, `kind = forward`), with the weights loaded the way
//! production loads them (burn-store, [`load_pytorch_checkpoint`] for PyTorch's packed GRU, LSTM
//! and attention tensors, or [`InitFile::load_module`]):
//!
//! ```no_run
//! # use burn::nn::{Gru, GruConfig};
//! # use burn::tensor::Device;
//! use burnside_trace::{Inference, InitFile, PortArgs};
//!
//! fn port(args: PortArgs) -> Result<(), Box<dyn std::error::Error>> {
//!     args.finish()?;
//!     let device = Device::default(); // no autodiff: the trace's mode is `inference`
//!     let init = InitFile::read(&args.init)?;
//!     let gru: Gru =
//!         burnside_trace::load_pytorch_checkpoint(GruConfig::new(6, 5, true).init(&device), "gru.pt")?;
//!     Inference::new().run(&args, &init, &device, &gru, |gru, batch| {
//!         let x = batch.float_input::<3>("x")?;
//!         let out = gru.forward(x, None);
//!         batch.tap().activation("gru", &out)?;
//!         Ok(out) // `args.steps` batches (`--batches N`), written to `-o`
//!     })?;
//!     Ok(())
//! }
//! ```
//!
//! [`TraceRecorder`] is the same recording call by call, for a loop that does not fit
//! [`Training`] (its `write` refuses a trace with a stage missing).
//!
//! Names are PyTorch's: the module's field paths (`fc1.weight`) with burn-store's standard layer
//! rules (norm layers' `gamma`/`beta` are `weight`/`bias`), plus a port's own renames
//! ([`TorchNames`]). `Linear` weights, their gradients and their optimizer moments are
//! transposed to PyTorch's `[out, in]` on the way out and back to burn's `[in, out]` on the way
//! in; the gates of burn's `Lstm`/`Gru`/`BiLstm`/`BiGru` are cut from and stacked into PyTorch's
//! packed `weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, and `MultiHeadAttention`'s
//! query, key and value from and into `in_proj_weight`/`in_proj_bias`. BatchNorm's running
//! statistics are recorded as `buffers.*` by `params_after`.
//!
//! The trace's metadata is what the port does: `device` and `dtype` are those of the recorded
//! parameters, `loss_fn` is what [`Training::with_loss_fn`] (or
//! [`TraceRecorder::with_loss_fn`]) declares, and absent if nothing does.

// No example here may drop a `Result` (`cargo test --doc` fails on one).
#![doc(test(attr(deny(unused_must_use))))]

mod capture;
mod checkpoint;
mod clip;
mod error;
mod host_tensor;
mod inference;
mod init_file;
mod optimizers;
mod packed;
mod param_paths;
mod port_args;
mod recorded_on;
mod safetensors_file;
mod statistics;
mod step_progress;
mod stream_writer;
mod torch_names;
mod trace_recorder;
mod training;

pub use checkpoint::{load_pytorch_checkpoint, load_pytorch_checkpoint_with};
pub use clip::ClipGradNorm;
pub use error::TraceError;
pub use host_tensor::{HostDType, HostTensor};
pub use inference::{Batch, Inference};
pub use init_file::InitFile;
pub use optimizers::OptimizerSpec;
pub use port_args::{PortArgs, UsageError, run_port};
pub use safetensors_file::SafetensorsFile;
pub use statistics::Statistics;
pub use step_progress::step_done;
pub use torch_names::TorchNames;
pub use trace_recorder::{Tap, TraceRecorder};
pub use training::{Step, Trained, Training};

pub(crate) use optimizers::optimizer_state;
pub(crate) use packed::pack_parts;
#[cfg(test)]
pub(crate) use param_paths::param_paths;
#[cfg(test)]
pub(crate) use param_paths::param_values;
pub(crate) use param_paths::{HostRead, ParamEntry, ValuesVisitor, param_paths_with};
pub(crate) use safetensors_file::write_safetensors;

/// The trace format version of a trace without aliases, and the init format version `InitFile`
/// reads (init files never hold aliases).
pub(crate) const FORMAT_VERSION: &str = "1";
/// The trace format version of a trace holding aliases (metadata `aliases`).
pub(crate) const ALIASES_VERSION: &str = "2";
/// The trace format version of a trace holding statistics (metadata `statistics`).
pub(crate) const STATISTICS_VERSION: &str = "3";
/// The burn version the recorder was built against, written as `framework_version`.
pub(crate) const BURN_VERSION: &str = "0.22.1";

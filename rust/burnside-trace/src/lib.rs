//! The burn side of burnside: load the starting point PyTorch exported and record what a burn
//! training loop computes, in the burnside trace format (version 1, see `docs/trace-format.md`).
//!
//! Add it to your own burn port:
//!
//! ```no_run
//! # fn port<M: burn::module::Module>(model: M, device: burn::tensor::Device) -> Result<(), burnside_trace::TraceError> {
//! use burnside_trace::{InitFile, OptimizerSpec, TraceRecorder};
//!
//! let init = InitFile::read("init.safetensors")?;
//! let model = init.load_module(model)?;          // PyTorch names and layout -> burn
//! let x = init.float_input::<2>("x", &device)?;   // the batch, bit for bit
//! let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
//! recorder.params_before(0, &model);
//! // ... logits, loss, grads, optimizer step, params_after, optim ...
//! recorder.write("burn.safetensors")?;
//! # Ok(()) }
//! ```
//!
//! Names are PyTorch's: the module's field paths (`fc1.weight`) with burn-store's standard layer
//! rules (norm layers' `gamma`/`beta` are `weight`/`bias`), plus a port's own renames
//! ([`TorchNames`]). `Linear` weights, their gradients and their optimizer moments are
//! transposed to PyTorch's `[out, in]` on the way out and back to burn's `[in, out]` on the way
//! in; the gates of burn's `Lstm`/`Gru`/`BiLstm`/`BiGru` are cut from and stacked into PyTorch's
//! packed `weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0` ([`Part`]). BatchNorm's running statistics are recorded as `buffers.*` by `params_after`.

mod clip;
mod error;
mod host_tensor;
mod init_file;
mod optimizer_spec;
mod optimizer_state;
mod param_paths;
mod port_args;
mod safetensors_file;
mod step_progress;
mod trace_recorder;

pub use clip::ClipGradNorm;
pub use error::TraceError;
pub use host_tensor::{HostDType, HostTensor};
pub use init_file::InitFile;
pub use optimizer_spec::OptimizerSpec;
pub use optimizer_state::optimizer_state;
pub use param_paths::{
    ParamEntry, Part, TorchNames, pack_parts, param_paths, param_paths_with, param_values,
};
pub use port_args::{PortArgs, UsageError, run_port};
pub use safetensors_file::{SafetensorsFile, write_safetensors};
pub use step_progress::{PROGRESS_ENV, step_done};
pub use trace_recorder::{Tap, TraceRecorder};

/// The trace format version this crate writes and the init format version it reads.
pub const FORMAT_VERSION: &str = "1";
/// The burn version the recorder was built against, written as `framework_version`.
pub const BURN_VERSION: &str = "0.22.1";

use burn::tensor::Tensor;

use super::TraceRecorder;
use crate::TraceError;

/// A forward pass's view of the recorder: layer outputs go to one step of a trace, or nowhere
/// ([`Tap::off`], for a forward pass that is not recorded, such as the final loss).
///
/// ```no_run
/// # use burn::tensor::Tensor;
/// # use burnside_trace::{Tap, TraceError};
/// # struct Model { ln2: burn::nn::LayerNorm }
/// impl Model {
///     fn forward(&self, x: Tensor<3>, mut tap: Tap) -> Result<Tensor<3>, TraceError> {
///         let x = self.ln2.forward(x);
///         tap.activation("ln2", &x)?;
///         Ok(x)
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Tap<'a>(pub(super) TapTo<'a>);

/// Where a tap's tensors go.
#[derive(Debug)]
pub(super) enum TapTo<'a> {
    /// Nowhere.
    Off,
    /// Into a step of the recorder, as they come.
    Recorder(&'a mut TraceRecorder, usize),
    /// A forward pass under graph capture: the tensors have no values yet, so their ids are kept
    /// and the replay records them.
    Deferred(&'a mut Vec<(String, burn_ir::TensorId)>),
}

impl<'a> Tap<'a> {
    /// A tap of a captured forward pass.
    pub(crate) fn deferred(taps: &'a mut Vec<(String, burn_ir::TensorId)>) -> Self {
        Tap(TapTo::Deferred(taps))
    }
}

impl Tap<'static> {
    /// A tap that records nothing.
    pub fn off() -> Self {
        Tap(TapTo::Off)
    }
}

impl Tap<'_> {
    /// Record `output` as the output of the layer PyTorch calls `name` (see
    /// [`TraceRecorder::activation`]); nothing when the tap is off.
    pub fn activation<const D: usize>(
        &mut self,
        name: &str,
        output: &Tensor<D>,
    ) -> Result<(), TraceError> {
        match &mut self.0 {
            TapTo::Recorder(recorder, step) => recorder.activation(*step, name, output),
            TapTo::Off => Ok(()),
            TapTo::Deferred(taps) => {
                let id = crate::capture::tensor_id(output)
                    .ok_or_else(|| crate::capture::not_captured(&format!("tap `{name}`")))?;
                taps.push((name.to_string(), id));
                Ok(())
            }
        }
    }
}

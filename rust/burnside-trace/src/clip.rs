use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// PyTorch's `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)`: every gradient
/// scaled by `min(1, max_norm / (total_norm + 1e-6))`, `total_norm` the L2 norm of all the
/// module's gradients together.
///
/// Written here because burn has no such clipping: burn-optim's `GradientClippingConfig::Norm`
/// clips each parameter's gradient by that gradient's own norm, which is another update as soon
/// as more than one tensor is clipped. Declare it on the recorder
/// ([`TraceRecorder::with_clip_grad_norm`](crate::TraceRecorder::with_clip_grad_norm)) so the
/// trace says so, record the gradients before clipping (what `backward` gave, as the PyTorch
/// recorder does), and apply it between `grads` and `optim.step`:
///
/// ```no_run
/// # fn port<M: burn::module::Module>(model: M, grads: burn::optim::GradientsParams,
/// #     recorder: &mut burnside_trace::TraceRecorder) -> Result<(), burnside_trace::TraceError> {
/// use burnside_trace::ClipGradNorm;
/// let clip = ClipGradNorm::new(1.0);
/// recorder.grads(0, &model, &grads)?;
/// let grads = clip.apply(&model, grads);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClipGradNorm {
    max_norm: f32,
}

impl ClipGradNorm {
    /// Clipping at `max_norm`, PyTorch's argument of the same name.
    pub fn new(max_norm: f32) -> Self {
        Self { max_norm }
    }

    /// The `max_norm` this clips at.
    pub fn max_norm(&self) -> f32 {
        self.max_norm
    }

    /// The L2 norm of all of `module`'s gradients in `grads` together.
    pub(crate) fn total_norm<M: Module>(&self, module: &M, grads: &GradientsParams) -> f32 {
        let mut norms = Norms {
            grads,
            squares: 0.0,
        };
        module.visit(&mut norms);
        norms.squares.sqrt() as f32
    }

    /// `grads` with every gradient of `module` scaled as `clip_grad_norm_` scales it.
    pub fn apply<M: Module>(&self, module: &M, mut grads: GradientsParams) -> GradientsParams {
        let total = self.total_norm(module, &grads);
        let coef = (self.max_norm / (total + 1e-6)).min(1.0);
        if coef < 1.0 {
            module.visit(&mut Scale {
                grads: &mut grads,
                coef,
            });
        }
        grads
    }
}

/// Sums the squares of each gradient's norm (each norm in f32, as PyTorch's per-tensor norms are).
struct Norms<'a> {
    grads: &'a GradientsParams,
    squares: f64,
}

impl ModuleVisitor for Norms<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.get::<D>(param.id) {
            let norm: f32 = grad.square().sum().sqrt().into_scalar();
            self.squares += f64::from(norm) * f64::from(norm);
        }
    }
}

struct Scale<'a> {
    grads: &'a mut GradientsParams,
    coef: f32,
}

impl ModuleVisitor for Scale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads.register(param.id, grad.mul_scalar(self.coef));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;
    use burn::tensor::Device;

    #[test]
    fn all_gradients_scale_by_one_factor_from_their_joint_norm() {
        let device = Device::default().autodiff();
        let layer = LinearConfig::new(2, 2).init(&device);
        let x = Tensor::<2>::from_data([[3.0, 4.0]], &device);
        let loss = layer.forward(x).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        // d loss / d weight = x for each output: [[3, 3], [4, 4]]; d loss / d bias = [1, 1]
        let clip = ClipGradNorm::new(1.0);
        let total = clip.total_norm(&layer, &grads);
        assert!((total - (9.0f32 + 9.0 + 16.0 + 16.0 + 1.0 + 1.0).sqrt()).abs() < 1e-6);
        let clipped = clip.apply(&layer, grads);
        let coef = 1.0 / (total + 1e-6);
        let bias: Vec<f32> = clipped
            .get::<1>(layer.bias.as_ref().unwrap().id)
            .unwrap()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        assert_eq!(bias, vec![coef, coef]);
        let weight = clipped.get::<2>(layer.weight.id).unwrap();
        let norm: f32 = weight.square().sum().sqrt().into_scalar();
        assert!((norm - 50f32.sqrt() * coef).abs() < 1e-6);
        // under the limit nothing changes
        let clip = ClipGradNorm::new(10.0);
        let loss = layer
            .forward(Tensor::<2>::from_data([[0.1, 0.1]], &device))
            .sum();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        let before: Vec<f32> = grads
            .get::<2>(layer.weight.id)
            .unwrap()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        let after = clip.apply(&layer, grads);
        let after: Vec<f32> = after
            .get::<2>(layer.weight.id)
            .unwrap()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        assert_eq!(before, after);
    }
}

use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, TensorData};

use crate::Arithmetic;

/// A1: `fc1 = Linear(4, 8)`, ReLU, `fc2 = Linear(8, 3)`, both with bias.
#[derive(Module, Debug)]
pub struct Mlp {
    /// First layer, burn layout `[4, 8]`.
    pub fc1: Linear,
    /// Second layer, burn layout `[8, 3]`.
    pub fc2: Linear,
}

impl Mlp {
    /// The logits for a batch `[n, 4]`, shape `[n, 3]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.fc2.forward(relu(self.fc1.forward(x)))
    }
}

/// A1 on `device`, with inputs and biases computed the Python way (f64, rounded once).
///
/// Build it on an autodiff device (`Device::default().autodiff()`), or no gradient reaches it.
pub fn a1_model(device: &Device) -> Mlp {
    a1_model_with(device, Arithmetic::F64RoundedOnce)
}

/// A1 on `device` with its biases computed in the given arithmetic.
///
/// The weights are always f64-then-f32: `sin`/`cos` of an integer has no f32 shortcut in the seed.
pub fn a1_model_with(device: &Device, arithmetic: Arithmetic) -> Mlp {
    Mlp {
        fc1: linear(4, 8, |k| 0.5 * (k as f64).sin(), 0.01, arithmetic, device),
        fc2: linear(8, 3, |k| 0.5 * (k as f64).cos(), -0.02, arithmetic, device),
    }
}

/// Mean cross-entropy, the seed's loss.
pub fn ce(device: &Device) -> CrossEntropyLoss {
    CrossEntropyLossConfig::new().init(device)
}

/// A Linear layer whose PyTorch weight is `weight[o][i] = wave(d_in * o + i + 1)` and bias
/// `bias[o] = bias_step * o`, stored in burn's `[d_in, d_out]` layout.
fn linear(
    d_in: usize,
    d_out: usize,
    wave: impl Fn(usize) -> f64,
    bias_step: f64,
    arithmetic: Arithmetic,
    device: &Device,
) -> Linear {
    let mut weight = vec![0.0_f32; d_in * d_out];
    for o in 0..d_out {
        for i in 0..d_in {
            weight[i * d_out + o] = wave(d_in * o + i + 1) as f32;
        }
    }
    let bias: Vec<f32> = (0..d_out)
        .map(|o| arithmetic.scaled(bias_step, o))
        .collect();
    Linear {
        weight: Param::from_tensor(Tensor::from_data(
            TensorData::new(weight, [d_in, d_out]),
            device,
        )),
        bias: Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(bias, [d_out]),
            device,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().expect("f32 tensor")
    }

    #[test]
    fn fc1_weight_is_stored_transposed() {
        let model = a1_model(&Device::default());
        let w = values(model.fc1.weight.val());
        // PyTorch weight[1][0] = 0.5 sin(5) sits at burn [0][1].
        assert_eq!(w[1], (0.5 * 5.0_f64.sin()) as f32);
        assert_eq!(model.fc1.weight.val().dims(), [4, 8]);
    }

    #[test]
    fn f32_arithmetic_moves_fc1_bias_5_by_one_ulp() {
        let device = Device::default();
        let exact = values(a1_model(&device).fc1.bias.expect("bias").val());
        let f32s = values(
            a1_model_with(&device, Arithmetic::F32)
                .fc1
                .bias
                .expect("bias")
                .val(),
        );
        assert_eq!(exact[5] as f64, 0.05000000074505806);
        assert_eq!(f32s[5] as f64, 0.04999999701976776);
        let differing: Vec<usize> = (0..8).filter(|&o| exact[o] != f32s[o]).collect();
        assert_eq!(differing, vec![5]);
    }

    #[test]
    fn fc2_bias_starts_with_negative_zero() {
        let bias = values(a1_model(&Device::default()).fc2.bias.expect("bias").val());
        assert!(bias[0] == 0.0 && bias[0].is_sign_negative());
    }
}

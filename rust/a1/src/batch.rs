use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::Arithmetic;

/// Batch size of A1.
const BATCH: usize = 4;
/// Input features of A1.
const FEATURES: usize = 4;

/// The 16 inputs `x[b][f] = 0.1 * (4b + f) - 0.5`, row-major, shape `[4, 4]`.
pub fn a1_inputs(arithmetic: Arithmetic) -> Vec<f32> {
    (0..BATCH * FEATURES)
        .map(|k| arithmetic.affine(0.1, k, -0.5))
        .collect()
}

/// The class labels `y = [0, 2, 1, 2]`.
pub fn a1_labels() -> Vec<i64> {
    vec![0, 2, 1, 2]
}

/// A1's batch on `device`: inputs `[4, 4]` and labels `[4]`, computed the Python way.
pub fn a1_data(device: &Device) -> (Tensor<2>, Tensor<1, Int>) {
    a1_data_with(device, Arithmetic::F64RoundedOnce)
}

/// A1's batch on `device` with the inputs computed in the given arithmetic.
pub fn a1_data_with(device: &Device, arithmetic: Arithmetic) -> (Tensor<2>, Tensor<1, Int>) {
    let x = Tensor::<2>::from_data(
        TensorData::new(a1_inputs(arithmetic), [BATCH, FEATURES]),
        device,
    );
    let y = Tensor::<1, Int>::from_data(TensorData::new(a1_labels(), [BATCH]), device);
    (x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seven_of_sixteen_inputs_differ_in_f32_arithmetic() {
        let exact = a1_inputs(Arithmetic::F64RoundedOnce);
        let f32s = a1_inputs(Arithmetic::F32);
        let differing = exact
            .iter()
            .zip(&f32s)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(differing, 7);
    }

    #[test]
    fn first_input_is_minus_one_half() {
        assert_eq!(a1_inputs(Arithmetic::F64RoundedOnce)[0], -0.5);
    }
}

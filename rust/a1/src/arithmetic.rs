/// How A1's inputs and biases are computed before they become f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arithmetic {
    /// Compute in f64 and round to f32 once, exactly like the Python side.
    #[default]
    F64RoundedOnce,
    /// Compute in f32 (`0.1 * k as f32 - 0.5`): 7 of the 16 inputs and `fc1.bias[5]`
    /// then differ from the Python side by 1–3 ulps.
    F32,
}

impl Arithmetic {
    /// `step * k`, in this arithmetic, as an f32 (a bias; `-0.02 * 0` stays `-0.0`).
    pub fn scaled(self, step: f64, k: usize) -> f32 {
        match self {
            Arithmetic::F64RoundedOnce => (step * k as f64) as f32,
            Arithmetic::F32 => step as f32 * k as f32,
        }
    }

    /// `scale * k + offset`, in this arithmetic, as an f32.
    pub fn affine(self, scale: f64, k: usize, offset: f64) -> f32 {
        match self {
            Arithmetic::F64RoundedOnce => (scale * k as f64 + offset) as f32,
            Arithmetic::F32 => scale as f32 * k as f32 + offset as f32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_once_gives_the_nearest_f32() {
        assert_eq!(Arithmetic::F64RoundedOnce.affine(0.1, 3, -0.5), -0.2_f32);
    }

    #[test]
    fn f32_arithmetic_misses_by_an_ulp_at_k_3() {
        let f32_value = Arithmetic::F32.affine(0.1, 3, -0.5);
        assert_ne!(f32_value, -0.2_f32);
        assert_eq!(f32_value as f64, -0.19999998807907104);
    }
}

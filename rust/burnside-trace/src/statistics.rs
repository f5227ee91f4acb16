//! A tensor recorded as its statistics only (trace format version 3, metadata `statistics`):
//! what a large model's trace keeps of the steps it does not hold in full.
//!
//! The statistics are those `burnside.trace.statistics.statistics_of` computes on the PyTorch
//! side, over the tensor's values widened to f64, in chunks: the mean, the L2 norm, the largest
//! magnitude, the count of non-finite values, and the xxh3-128 hash of the bytes as safetensors
//! stores the tensor (little-endian, row-major). Equal hashes (with equal dtype and shape) are
//! bit-identical tensors; different statistics bound how far apart two tensors are.

use burn_std::{bf16, f16};
use serde_json::{Value, json};
use xxhash_rust::xxh3::Xxh3;

use crate::{HostDType, HostTensor};

/// Elements per chunk (the PyTorch side's `CHUNK`): statistics of a tensor in bounded memory.
const CHUNK: usize = 1 << 20;

/// One tensor's statistics, without its data.
#[derive(Debug, Clone, PartialEq)]
pub struct Statistics {
    /// The element type the tensor would be stored as.
    pub dtype: HostDType,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// The mean over the f64 values; NaN when a value is not finite (0 for no elements).
    pub mean: f64,
    /// `sqrt(sum x^2)` in f64; NaN when a value is not finite.
    pub norm: f64,
    /// The largest magnitude; NaN when a value is NaN.
    pub max_abs: f64,
    /// How many values are NaN or infinite.
    pub nonfinite: u64,
    /// xxh3-128 of the stored bytes.
    pub xxh3: u128,
}

impl Statistics {
    /// The statistics of `tensor`, as the file would store it.
    pub fn of(tensor: &HostTensor) -> Self {
        let mut stats = Running::default();
        for chunk in tensor.bytes.chunks(CHUNK * tensor.dtype.size()) {
            stats.hash.update(chunk);
            match tensor.dtype {
                HostDType::F32 => stats.add(chunk, |b: [u8; 4]| f64::from(f32::from_le_bytes(b))),
                HostDType::F64 => stats.add(chunk, f64::from_le_bytes),
                HostDType::I64 => stats.add(chunk, |b: [u8; 8]| i64::from_le_bytes(b) as f64),
                // the raw words hashed, the values widened exactly (as the Python side's statistics)
                HostDType::BF16 => stats.add(chunk, |b: [u8; 2]| f64::from(bf16::from_le_bytes(b))),
                HostDType::F16 => stats.add(chunk, |b: [u8; 2]| f64::from(f16::from_le_bytes(b))),
            }
        }
        stats.finish(tensor.dtype, tensor.shape.clone())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bit-identical tensors: the same dtype, shape and hash of the bytes.
    pub fn same_bits(&self, other: &Statistics) -> bool {
        self.dtype == other.dtype && self.shape == other.shape && self.xxh3 == other.xxh3
    }

    /// The hash as the file writes it: 32 lower-case hex digits.
    pub fn xxh3_hex(&self) -> String {
        format!("{:032x}", self.xxh3)
    }

    /// The entry of metadata `statistics` (the PyTorch side's `Statistics.to_json()`: non-finite
    /// numbers as the strings "nan", "inf", "-inf").
    pub fn to_json(&self) -> Value {
        json!({
            "dtype": crate::stream_writer::dtype_name(self.dtype),
            "shape": self.shape,
            "mean": number(self.mean),
            "norm": number(self.norm),
            "max_abs": number(self.max_abs),
            "nonfinite": self.nonfinite,
            "xxh3": self.xxh3_hex(),
        })
    }
}

fn number(value: f64) -> Value {
    if value.is_finite() {
        json!(value)
    } else if value.is_nan() {
        json!("nan")
    } else if value > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

/// The sums so far, over the chunks seen.
struct Running {
    hash: Xxh3,
    total: f64,
    squares: f64,
    peak: f64,
    nan: bool,
    nonfinite: u64,
    n: u64,
}

impl Default for Running {
    fn default() -> Self {
        Self {
            hash: Xxh3::new(),
            total: 0.0,
            squares: 0.0,
            peak: 0.0,
            nan: false,
            nonfinite: 0,
            n: 0,
        }
    }
}

impl Running {
    /// One chunk's elements (little-endian, `N` bytes each, `value` of each): each chunk's sums
    /// are added to the totals (8 partial sums within a chunk, element `i` in sum `i % 8`, closer
    /// to the PyTorch side's pairwise sums than one running sum). The 8 sums run side by side over
    /// groups of 8, which the compiler vectorizes; non-finite elements are counted in a second
    /// pass only when there are any: one makes its square, and so the sums of squares, non-finite.
    fn add<const N: usize>(&mut self, chunk: &[u8], value: impl Fn([u8; N]) -> f64) {
        let (elements, rest) = chunk.as_chunks::<N>();
        debug_assert!(rest.is_empty(), "a chunk of whole elements");
        let (groups, tail) = elements.as_chunks::<8>();
        let (mut sums, mut squares, mut peak) = ([0.0_f64; 8], [0.0_f64; 8], [0.0_f64; 8]);
        let mut lane = |j: usize, v: f64| {
            sums[j] += v;
            squares[j] += v * v;
            let a = v.abs();
            // NaN's |x| is never greater: a NaN is counted below and makes the peak NaN
            peak[j] = if a > peak[j] { a } else { peak[j] };
        };
        for group in groups {
            for (j, element) in group.iter().enumerate() {
                lane(j, value(*element));
            }
        }
        for (j, element) in tail.iter().enumerate() {
            lane(j, value(*element));
        }
        self.n += elements.len() as u64;
        let pairwise =
            |s: [f64; 8]| ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
        let squares = pairwise(squares);
        if !squares.is_finite() {
            for element in elements {
                let v = value(*element);
                if !v.is_finite() {
                    self.nonfinite += 1;
                    self.nan |= v.is_nan();
                }
            }
        }
        self.total += pairwise(sums);
        self.squares += squares;
        self.peak = peak.into_iter().fold(self.peak, f64::max);
    }

    fn finish(self, dtype: HostDType, shape: Vec<usize>) -> Statistics {
        let (mut mean, mut norm) = if self.n == 0 {
            (0.0, 0.0)
        } else {
            (self.total / self.n as f64, self.squares.sqrt())
        };
        if !self.squares.is_finite() {
            norm = f64::NAN;
        }
        if self.nonfinite > 0 {
            mean = f64::NAN;
            norm = f64::NAN;
        }
        Statistics {
            dtype,
            shape,
            mean,
            norm,
            max_abs: if self.nan { f64::NAN } else { self.peak },
            nonfinite: self.nonfinite,
            xxh3: self.hash.digest128(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_a_small_tensor() {
        let t = HostTensor::from_f32(&[3.0, -4.0, 0.0, 1.0], vec![2, 2]);
        let s = Statistics::of(&t);
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.norm, (26.0_f64).sqrt());
        assert_eq!(s.max_abs, 4.0);
        assert_eq!(s.nonfinite, 0);
        assert_eq!(s.xxh3, xxhash_rust::xxh3::xxh3_128(&t.bytes));
        assert_eq!(s.xxh3_hex().len(), 32);
        let json = s.to_json();
        assert_eq!(json["dtype"], "F32");
        assert_eq!(json["shape"], json!([2, 2]));
        assert_eq!(json["max_abs"], json!(4.0));
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 7, "{keys:?}");
    }

    #[test]
    fn the_hash_over_chunks_is_the_hash_of_the_whole_and_sums_agree() {
        // more than one chunk, not a multiple of it
        let values: Vec<f32> = (0..CHUNK + 12_345)
            .map(|i| ((i % 977) as f32) * 0.25 - 7.0)
            .collect();
        let t = HostTensor::from_f32(&values, vec![values.len()]);
        let s = Statistics::of(&t);
        assert_eq!(s.xxh3, xxhash_rust::xxh3::xxh3_128(&t.bytes));
        let mean: f64 = values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64;
        let norm: f64 = values
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            .sqrt();
        assert!(
            (s.mean - mean).abs() <= 1e-12 * mean.abs().max(1.0),
            "{} {mean}",
            s.mean
        );
        assert!((s.norm - norm).abs() <= 1e-12 * norm, "{} {norm}", s.norm);
        assert_eq!(s.max_abs, 7.0_f64.max(976.0 * 0.25 - 7.0));
    }

    #[test]
    fn non_finite_values_make_mean_and_norm_nan_and_a_nan_the_largest_magnitude() {
        let inf = Statistics::of(&HostTensor::from_f32(&[1.0, f32::NEG_INFINITY], vec![2]));
        assert!(inf.mean.is_nan() && inf.norm.is_nan());
        assert_eq!(inf.max_abs, f64::INFINITY);
        assert_eq!(inf.nonfinite, 1);
        assert_eq!(inf.to_json()["mean"], "nan");
        assert_eq!(inf.to_json()["max_abs"], "inf");
        let nan = Statistics::of(&HostTensor::from_f32(
            &[f32::NAN, 5.0, f32::INFINITY],
            vec![3],
        ));
        assert!(nan.max_abs.is_nan());
        assert_eq!(nan.nonfinite, 2);
        assert_eq!(nan.to_json()["max_abs"], "nan");
        let huge = Statistics::of(&HostTensor {
            dtype: HostDType::F64,
            shape: vec![2],
            bytes: [1e300_f64, 1e300]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        });
        assert!(huge.norm.is_nan(), "the squares overflow: not a number");
        assert_eq!(huge.nonfinite, 0);
    }

    #[test]
    fn empty_tensors_have_zero_statistics() {
        let s = Statistics::of(&HostTensor::from_f32(&[], vec![0, 3]));
        assert_eq!((s.mean, s.norm, s.max_abs, s.nonfinite), (0.0, 0.0, 0.0, 0));
        assert!(s.is_empty());
        assert_eq!(s.xxh3, xxhash_rust::xxh3::xxh3_128(&[]));
    }
}

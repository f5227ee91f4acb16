use std::cell::RefCell;
use std::collections::VecDeque;

use burn::tensor::{DType, Tensor, TensorData};
use burn_dispatch::backends::Flex;

use crate::TraceError;

/// The element types a trace or init file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostDType {
    /// 32-bit float: parameters, activations, gradients, optimizer state.
    F32,
    /// 64-bit float.
    F64,
    /// 64-bit signed integer: class labels.
    I64,
    /// bfloat16 (`half::bf16`, burn's `DType::BF16`): a half-precision model's tensors, stored
    /// as their raw 16-bit words.
    BF16,
    /// IEEE half (`half::f16`, burn's `DType::F16`).
    F16,
}

impl HostDType {
    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            HostDType::BF16 | HostDType::F16 => 2,
            HostDType::F32 => 4,
            HostDType::F64 | HostDType::I64 => 8,
        }
    }

    /// Whether this is a float dtype (every one but `I64`).
    pub fn is_float(self) -> bool {
        self != HostDType::I64
    }

    /// The burn dtype of the same elements.
    pub fn burn(self) -> DType {
        match self {
            HostDType::F32 => DType::F32,
            HostDType::F64 => DType::F64,
            HostDType::I64 => DType::I64,
            HostDType::BF16 => DType::BF16,
            HostDType::F16 => DType::F16,
        }
    }
}

/// A tensor on the host, row-major and little-endian: what goes into or comes out of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    /// Element type.
    pub dtype: HostDType,
    /// Dimensions, outermost first; empty for a 0-d scalar.
    pub shape: Vec<usize>,
    /// The elements, row-major, little-endian.
    pub bytes: Vec<u8>,
}

impl HostTensor {
    /// An f32 tensor from its values and shape.
    pub fn from_f32(values: &[f32], shape: Vec<usize>) -> Self {
        let bytes = le_bytes(values, f32::to_le_bytes);
        Self {
            dtype: HostDType::F32,
            shape,
            bytes,
        }
    }

    /// An i64 tensor from its values and shape.
    pub fn from_i64(values: &[i64], shape: Vec<usize>) -> Self {
        let bytes = le_bytes(values, i64::to_le_bytes);
        Self {
            dtype: HostDType::I64,
            shape,
            bytes,
        }
    }

    /// Copy burn tensor data to the host: f64, bf16 and f16 stay as they are, other floats become
    /// f32, integers i64.
    pub fn from_data(data: TensorData) -> Result<Self, TraceError> {
        if let Some(dtype) = host_dtype(data.dtype()) {
            // Already a host type: the bytes are the little-endian elements, one copy.
            return Ok(Self::copied(dtype, data.shape(), data.as_bytes()));
        }
        let shape = data.shape().to_vec();
        let dtype = data.dtype();
        let mismatch = |e: burn::tensor::DataError| TraceError::Mismatch {
            name: String::from("<tensor>"),
            message: format!("cannot read {dtype:?} data: {e:?}"),
        };
        Ok(match dtype {
            DType::F64 => {
                let values = data.try_into_vec_as::<f64>().map_err(mismatch)?;
                Self {
                    dtype: HostDType::F64,
                    shape,
                    bytes: le_bytes(&values, f64::to_le_bytes),
                }
            }
            d if d.is_float() => {
                Self::from_f32(&data.try_into_vec_as::<f32>().map_err(mismatch)?, shape)
            }
            _ => Self::from_i64(&data.try_into_vec_as::<i64>().map_err(mismatch)?, shape),
        })
    }

    /// `tensor` on the host, as [`from_data`](Self::from_data) of its data makes it: one copy
    /// of the bytes where the backend keeps them on the host (see [`with_host_bytes`]).
    pub(crate) fn of<const D: usize>(tensor: &Tensor<D>) -> Result<Self, TraceError> {
        with_host_bytes(tensor, Self::copied).map_or_else(|| Self::from_data(tensor.to_data()), Ok)
    }

    /// The `shape` tensor of `dtype` whose little-endian elements are `bytes`: one copy, into a
    /// buffer of [`buffer`]'s.
    pub(crate) fn copied(dtype: HostDType, shape: &[usize], bytes: &[u8]) -> Self {
        Self {
            dtype,
            shape: shape.to_vec(),
            bytes: buffer_with(bytes),
        }
    }

    /// A 2-d `tensor` transposed on the host, as
    /// [`transposed_from_data`](Self::transposed_from_data) of its data makes it: one
    /// transposing pass over bytes read in place where the backend keeps them on the host.
    pub(crate) fn transposed_of<const D: usize>(tensor: &Tensor<D>) -> Result<Self, TraceError> {
        with_host_bytes(tensor, |dtype, shape, bytes| {
            Self::transposed_from(dtype, shape, bytes)
        })
        .flatten()
        .map_or_else(|| Self::transposed_from_data(tensor.to_data()), Ok)
    }

    /// The `[rows, cols]` tensor of `dtype` whose bytes are `bytes`, transposed; `None` for
    /// another rank.
    pub(crate) fn transposed_from(dtype: HostDType, shape: &[usize], bytes: &[u8]) -> Option<Self> {
        let &[rows, cols] = shape else {
            return None;
        };
        Some(Self {
            dtype,
            shape: vec![cols, rows],
            bytes: transpose_bytes(bytes, rows, cols, dtype),
        })
    }

    /// A 2-d `data` (`[a, b]`) transposed to `[b, a]` on the host, moving whole elements: the
    /// bytes of `from_data(data)` transposed, read once.
    pub(crate) fn transposed_from_data(data: TensorData) -> Result<Self, TraceError> {
        let transposed = host_dtype(data.dtype())
            .and_then(|dtype| Self::transposed_from(dtype, data.shape(), data.as_bytes()));
        match transposed {
            Some(tensor) => Ok(tensor),
            None => Ok(Self::from_data(data)?.transpose_2d()),
        }
    }

    /// The transpose of a 2-d tensor (`[a, b]` becomes `[b, a]`), moving whole elements, in
    /// cache-sized blocks. A tensor of another rank is returned as is.
    pub(crate) fn transpose_2d(self) -> Self {
        Self::transposed_from(self.dtype, &self.shape, &self.bytes).unwrap_or(self)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as f32, if this is an f32 tensor.
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        (self.dtype == HostDType::F32).then(|| {
            self.bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
    }

    /// The elements as i64, if this is an i64 tensor.
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        (self.dtype == HostDType::I64).then(|| {
            self.bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect()
        })
    }

    /// Burn tensor data with the same elements and shape.
    pub fn to_data(&self) -> TensorData {
        TensorData::from_bytes_vec(self.bytes.clone(), self.shape.clone(), self.dtype.burn())
    }

    /// A bf16 or f16 tensor widened to f32, exactly (every bf16 and f16 value is an f32 value;
    /// burn's own conversion, through the `half` crate); any other tensor as it is.
    pub fn widened(self) -> Self {
        match self.dtype {
            HostDType::BF16 | HostDType::F16 => {
                let data = self.to_data().convert_dtype(DType::F32);
                Self::copied(HostDType::F32, &self.shape, data.as_bytes())
            }
            _ => self,
        }
    }

    /// The same tensor with its shape replaced; the element count must not change.
    pub(crate) fn reshaped(mut self, shape: Vec<usize>) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), self.len());
        self.shape = shape;
        self
    }

    /// The tensors stacked end to end along dimension 0 (`[a, n]` and `[b, n]` make `[a + b, n]`),
    /// or `None` if their dtypes or their shapes beyond dimension 0 differ (or there are none).
    pub(crate) fn concat0(parts: &[HostTensor]) -> Option<Self> {
        let first = parts.first()?;
        let rest = first.shape.get(1..)?;
        if parts
            .iter()
            .any(|p| p.dtype != first.dtype || p.shape.get(1..) != Some(rest))
        {
            return None;
        }
        let mut shape = first.shape.clone();
        shape[0] = parts.iter().map(|p| p.shape[0]).sum();
        let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.bytes.len()).sum());
        for p in parts {
            bytes.extend_from_slice(&p.bytes);
        }
        Some(Self {
            dtype: first.dtype,
            shape,
            bytes,
        })
    }

    /// The tensor cut into `of` equal slices along dimension 0, or `None` if it has no
    /// dimension 0 or its length is not a multiple of `of`.
    pub(crate) fn split0(&self, of: usize) -> Option<Vec<Self>> {
        let rows = *self.shape.first()?;
        if of == 0 || rows % of != 0 {
            return None;
        }
        let mut shape = self.shape.clone();
        shape[0] = rows / of;
        let chunk = self.bytes.len() / of;
        Some(
            self.bytes
                .chunks_exact(chunk.max(1))
                .take(of)
                .map(|bytes| Self {
                    dtype: self.dtype,
                    shape: shape.clone(),
                    bytes: bytes.to_vec(),
                })
                .collect(),
        )
    }

    /// The transpose of a 2-d tensor (`[a, b]` becomes `[b, a]`), moving whole elements (the
    /// tests' model of burn-store's `Linear` layout change).
    #[cfg(test)]
    pub(crate) fn transposed(&self) -> Self {
        assert_eq!(
            self.shape.len(),
            2,
            "only a 2-d tensor has a transpose here"
        );
        let (rows, cols, size) = (self.shape[0], self.shape[1], self.dtype.size());
        let mut bytes = vec![0_u8; self.bytes.len()];
        for r in 0..rows {
            for c in 0..cols {
                let from = (r * cols + c) * size;
                let to = (c * rows + r) * size;
                bytes[to..to + size].copy_from_slice(&self.bytes[from..from + size]);
            }
        }
        Self {
            dtype: self.dtype,
            shape: vec![cols, rows],
            bytes,
        }
    }
}

/// Buffers of tensors already written to a trace file, kept for the next tensors' bytes: a
/// recording copies every parameter, gradient and moment of every step, and a fresh allocation of
/// that size is fresh pages the kernel must fault in and clear each time. Only large buffers are
/// kept, at most [`SPARE_BUFFERS`] of them and [`SPARE_BYTES`] in all, and one is reused only for
/// bytes that fill most of it, so a tensor kept in memory holds little more than its size.
const SPARE_MIN: usize = 1 << 20;
const SPARE_BUFFERS: usize = 8;
const SPARE_BYTES: usize = 192 << 20;

thread_local! {
    static SPARE: RefCell<VecDeque<Vec<u8>>> = const { RefCell::new(VecDeque::new()) };
}

/// An empty buffer with room for `len` bytes: a spare one if one fits, else a new one.
pub(crate) fn buffer(len: usize) -> Vec<u8> {
    if len >= SPARE_MIN {
        let spare = SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            let fits = |b: &Vec<u8>| b.capacity() >= len && b.capacity() - len <= len / 4;
            let at = (0..spare.len())
                .filter(|&i| fits(&spare[i]))
                .min_by_key(|&i| spare[i].capacity())?;
            spare.remove(at)
        });
        if let Some(mut buffer) = spare {
            buffer.clear();
            return buffer;
        }
    }
    Vec::with_capacity(len)
}

/// `bytes` in a buffer of [`buffer`]'s.
pub(crate) fn buffer_with(bytes: &[u8]) -> Vec<u8> {
    let mut out = buffer(bytes.len());
    out.extend_from_slice(bytes);
    out
}

/// Keep `buffer`, whose bytes are no longer needed, for a later [`buffer`] (the oldest spare
/// goes when there are too many).
pub(crate) fn recycle(buffer: Vec<u8>) {
    if buffer.capacity() < SPARE_MIN || buffer.capacity() > SPARE_BYTES {
        return;
    }
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        spare.push_back(buffer);
        while spare.len() > SPARE_BUFFERS
            || spare.iter().map(Vec::capacity).sum::<usize>() > SPARE_BYTES
        {
            spare.pop_front();
        }
    });
}

/// The host dtype whose bytes `dtype`'s are, element for element, on this (little-endian) machine.
fn host_dtype(dtype: DType) -> Option<HostDType> {
    if !cfg!(target_endian = "little") {
        return None;
    }
    match dtype {
        DType::F32 => Some(HostDType::F32),
        DType::F64 => Some(HostDType::F64),
        DType::I64 => Some(HostDType::I64),
        DType::BF16 => Some(HostDType::BF16),
        DType::F16 => Some(HostDType::F16),
        _ => None,
    }
}

/// `f(dtype, shape, bytes)` of `tensor`'s elements where they are, without a copy, when the
/// backend keeps them on the host in a host dtype, row-major from the start of its buffer: burn's
/// Flex CPU backend's tensors, which is every tensor of a port on burn's CPU device but views
/// (a transpose, a slice). `None` otherwise (another backend, a view, f8): the caller reads
/// `tensor.to_data()`.
///
/// `to_data()` / `into_data()` of a tensor the model or the optimizer still holds copies the
/// bytes twice in burn 0.22.1 (to a new `Vec`, then to an aligned buffer), each into fresh pages;
/// at GPT-2 size those copies were most of the recorder's time beyond the training loop.
pub(crate) fn with_host_bytes<const D: usize, R>(
    tensor: &Tensor<D>,
    f: impl FnOnce(HostDType, &[usize], &[u8]) -> R,
) -> Option<R> {
    // A handle to the same buffer (the autodiff node is dropped from the clone, not the tensor).
    let flex = tensor.clone().inner().try_into_primitive::<Flex>().ok()?;
    with_flex_bytes(&flex, f)
}

/// `f(dtype, shape, bytes)` of a Flex tensor's elements where they are (see [`with_host_bytes`]):
/// `None` for a view that is not contiguous from its buffer's start, or a dtype a trace does not
/// hold. The replay of a captured graph reads its operations' outputs this way too.
pub(crate) fn with_flex_bytes<R>(
    flex: &burn_flex::FlexTensor,
    f: impl FnOnce(HostDType, &[usize], &[u8]) -> R,
) -> Option<R> {
    let dtype = host_dtype(flex.dtype())?;
    let layout = flex.layout();
    if !layout.is_contiguous() || layout.start_offset() != 0 {
        return None;
    }
    let shape: Vec<usize> = layout.shape().to_vec();
    let len = shape.iter().product::<usize>() * dtype.size();
    let bytes = flex.bytes().get(..len)?;
    Some(f(dtype, &shape, bytes))
}

/// `values` as little-endian bytes.
fn le_bytes<T: Copy, const N: usize>(values: &[T], to_le: fn(T) -> [u8; N]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() * N);
    for v in values {
        bytes.extend_from_slice(&to_le(*v));
    }
    bytes
}

/// The bytes of a row-major `[rows, cols]` tensor of `dtype` transposed to `[cols, rows]`.
fn transpose_bytes(bytes: &[u8], rows: usize, cols: usize, dtype: HostDType) -> Vec<u8> {
    match dtype {
        HostDType::BF16 | HostDType::F16 => transpose_elements::<2>(bytes, rows, cols),
        HostDType::F32 => transpose_elements::<4>(bytes, rows, cols),
        HostDType::F64 | HostDType::I64 => transpose_elements::<8>(bytes, rows, cols),
    }
}

/// Transpose `[rows, cols]` elements of `N` bytes a block of rows by a block of columns at a
/// time, so that the block's reads and writes stay in cache; each output row's part of a block is
/// written in one run.
fn transpose_elements<const N: usize>(bytes: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    const BLOCK: usize = 32;
    let (src, rest) = bytes.as_chunks::<N>();
    assert!(
        rest.is_empty() && src.len() == rows * cols,
        "{} bytes are no [{rows}, {cols}] tensor of {N}-byte elements",
        bytes.len()
    );
    let mut out = buffer(bytes.len());
    out.resize(bytes.len(), 0);
    let (dst, _) = out.as_chunks_mut::<N>();
    for r0 in (0..rows).step_by(BLOCK) {
        let r1 = (r0 + BLOCK).min(rows);
        for c0 in (0..cols).step_by(BLOCK) {
            for c in c0..(c0 + BLOCK).min(cols) {
                let out = &mut dst[c * rows + r0..c * rows + r1];
                let column = src[r0 * cols + c..].iter().step_by(cols);
                for (to, from) in out.iter_mut().zip(column) {
                    *to = *from;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_tensor_is_read_in_place_and_as_its_data_reads() {
        use burn::tensor::Device;
        let device = Device::default();
        let plain = Tensor::<2>::from_data(
            TensorData::new(vec![1.0f32, 2.0, 3.0, -0.0, 5.0, 6.0], [2, 3]),
            &device,
        );
        let tracked = plain.clone().autodiff().require_grad();
        for tensor in [&plain, &tracked, &(tracked.clone() * 2.0)] {
            let seen = with_host_bytes(tensor, |dtype, shape, bytes| {
                (dtype, shape.to_vec(), bytes.to_vec())
            });
            let (dtype, shape, bytes) = seen.expect("a Flex tensor's bytes are on the host");
            let data = HostTensor::from_data(tensor.to_data()).unwrap();
            assert_eq!(
                (dtype, shape, bytes),
                (data.dtype, data.shape.clone(), data.bytes.clone())
            );
            assert_eq!(HostTensor::of(tensor).unwrap(), data);
            assert_eq!(
                HostTensor::transposed_of(tensor).unwrap(),
                data.transposed()
            );
        }
        // a view (the transpose) is not read in place; its data still is right
        let view = plain.clone().transpose();
        assert!(with_host_bytes(&view, |_, _, _| ()).is_none());
        let data = HostTensor::from_data(plain.to_data()).unwrap();
        assert_eq!(HostTensor::of(&view).unwrap(), data.transposed());
    }

    #[test]
    fn transpose_moves_elements_bit_for_bit() {
        let t = HostTensor::from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0, -0.0], vec![2, 3]);
        let tt = t.transposed();
        assert_eq!(tt.shape, vec![3, 2]);
        assert_eq!(tt.to_f32().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, -0.0]);
        assert!(tt.to_f32().unwrap()[5].is_sign_negative());
        assert_eq!(tt.transposed(), t);
    }

    #[test]
    fn the_blocked_transpose_is_the_element_by_element_one() {
        for (rows, cols) in [(1, 1), (3, 70), (70, 3), (33, 65), (64, 64)] {
            let n = rows * cols;
            let f = HostTensor::from_f32(
                &(0..n).map(|i| i as f32 - 0.5).collect::<Vec<_>>(),
                vec![rows, cols],
            );
            assert_eq!(f.clone().transpose_2d(), f.transposed(), "[{rows}, {cols}]");
            let data = f.to_data();
            assert_eq!(
                HostTensor::transposed_from_data(data).unwrap(),
                f.transposed()
            );
            let i = HostTensor::from_i64(&(0..n as i64).collect::<Vec<_>>(), vec![rows, cols]);
            assert_eq!(i.clone().transpose_2d(), i.transposed());
        }
    }

    #[test]
    fn split_and_concat_along_dimension_0_are_inverses() {
        let t = HostTensor::from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], vec![4, 2]);
        let parts = t.split0(2).unwrap();
        assert_eq!(parts[1].shape, vec![2, 2]);
        assert_eq!(parts[1].to_f32().unwrap(), vec![5.0, 6.0, 7.0, 8.0]);
        assert_eq!(HostTensor::concat0(&parts).unwrap(), t);
        assert!(t.split0(3).is_none(), "4 rows do not cut in 3");
        let other = HostTensor::from_f32(&[1.0, 2.0, 3.0], vec![1, 3]);
        assert!(HostTensor::concat0(&[t.clone(), other]).is_none());
        assert!(HostTensor::from_f32(&[1.0], vec![]).split0(1).is_none());
    }

    #[test]
    fn data_round_trip_keeps_dtype_and_bits() {
        let t = HostTensor::from_i64(&[0, 2, 1, 2], vec![4]);
        assert_eq!(HostTensor::from_data(t.to_data()).unwrap(), t);
        let f = HostTensor::from_f32(&[0.1, f32::MIN_POSITIVE], vec![2]);
        assert_eq!(HostTensor::from_data(f.to_data()).unwrap(), f);
    }
}

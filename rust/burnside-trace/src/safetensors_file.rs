use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::{HostDType, HostTensor, TraceError};

/// A safetensors file read into memory: its tensors by name and its `__metadata__`.
#[derive(Debug, Clone)]
pub struct SafetensorsFile {
    /// Where it was read from (for messages).
    pub path: PathBuf,
    /// The tensors, by name.
    pub tensors: BTreeMap<String, HostTensor>,
    /// The string-to-string metadata map.
    pub metadata: BTreeMap<String, String>,
}

impl SafetensorsFile {
    /// Read a whole safetensors file; only F32, F64 and I64 tensors are accepted.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let buffer = std::fs::read(&path).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        let bad = |e: safetensors::SafeTensorError| TraceError::Safetensors {
            path: path.clone(),
            message: e.to_string(),
        };
        let (_, header) = SafeTensors::read_metadata(&buffer).map_err(bad)?;
        let metadata = header
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let file = SafeTensors::deserialize(&buffer).map_err(bad)?;
        let mut tensors = BTreeMap::new();
        for (name, view) in file.tensors() {
            let dtype = match view.dtype() {
                Dtype::F32 => HostDType::F32,
                Dtype::F64 => HostDType::F64,
                Dtype::I64 => HostDType::I64,
                other => {
                    return Err(TraceError::Format {
                        path: path.clone(),
                        message: format!(
                            "tensor `{name}` has dtype {other:?}; burnside-trace reads F32, F64 and I64"
                        ),
                    });
                }
            };
            let tensor = HostTensor {
                dtype,
                shape: view.shape().to_vec(),
                bytes: view.data().to_vec(),
            };
            tensors.insert(name, tensor);
        }
        Ok(Self {
            path,
            tensors,
            metadata,
        })
    }

    /// A metadata value, or a format error naming the missing key.
    pub fn meta(&self, key: &str) -> Result<&str, TraceError> {
        self.metadata
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| TraceError::Format {
                path: self.path.clone(),
                message: format!("metadata key `{key}` is missing"),
            })
    }
}

/// Write tensors and metadata as a safetensors file, atomically: the bytes go to a temporary
/// file in the same directory, which is then renamed over `path`, so a reader never sees half a
/// file and a failed write leaves any previous file in place.
pub(crate) fn write_safetensors(
    path: impl AsRef<Path>,
    tensors: &BTreeMap<String, HostTensor>,
    metadata: &BTreeMap<String, String>,
) -> Result<(), TraceError> {
    let path = path.as_ref();
    let bad = |message: String| TraceError::Safetensors {
        path: path.to_path_buf(),
        message,
    };
    let mut views = Vec::with_capacity(tensors.len());
    for (name, tensor) in tensors {
        let dtype = match tensor.dtype {
            HostDType::F32 => Dtype::F32,
            HostDType::F64 => Dtype::F64,
            HostDType::I64 => Dtype::I64,
        };
        let view = TensorView::new(dtype, tensor.shape.clone(), &tensor.bytes)
            .map_err(|e| bad(format!("tensor `{name}`: {e}")))?;
        views.push((name.clone(), view));
    }
    let metadata: HashMap<String, String> = metadata.clone().into_iter().collect();
    let bytes = safetensors::serialize(views, Some(metadata)).map_err(|e| bad(e.to_string()))?;

    let io = |source: std::io::Error| TraceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| io(std::io::Error::other("no file name")))?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::File::create(&temp)
        .and_then(|mut file| file.write_all(&bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io(source));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("burnside-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn write_then_read_round_trips() {
        let path = scratch("round.safetensors");
        let mut tensors = BTreeMap::new();
        tensors.insert("a".to_string(), HostTensor::from_f32(&[1.5, -0.0], vec![2]));
        tensors.insert("b".to_string(), HostTensor::from_i64(&[7], vec![]));
        let mut metadata = BTreeMap::new();
        metadata.insert("k".to_string(), "v".to_string());
        write_safetensors(&path, &tensors, &metadata).unwrap();
        let file = SafetensorsFile::read(&path).unwrap();
        assert_eq!(file.tensors, tensors);
        assert_eq!(file.meta("k").unwrap(), "v");
        assert!(file.meta("missing").is_err());
    }

    #[test]
    fn a_write_into_a_missing_directory_is_an_error_not_a_panic() {
        let path = scratch("no/such/dir/trace.safetensors");
        let result = write_safetensors(&path, &BTreeMap::new(), &BTreeMap::new());
        assert!(matches!(result, Err(TraceError::Io { .. })));
    }
}

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use safetensors::tensor::{Dtype, TensorView};

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

/// A file read with some tensors left in it: the file, those tensors' places, the open file.
type ReadDeferring = (
    SafetensorsFile,
    BTreeMap<String, Deferred>,
    Arc<std::fs::File>,
);

impl SafetensorsFile {
    /// Read a whole safetensors file; only F32, F64, BF16, F16 and I64 tensors are accepted.
    ///
    /// The header is checked before any tensor is read: its length against the file's, every
    /// tensor's byte length against its dtype and shape (checked arithmetic, so a shape whose
    /// element count overflows is an error), its offsets against the others' (no overlap, no
    /// gap, none beyond the file) and no key twice. A tensor's buffer grows only as its bytes
    /// arrive, so a header that claims more data than the file holds fails without allocating
    /// what it claims. Every error names the file and what is wrong.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        Ok(Self::read_deferring(path, &|_| false)?.0)
    }

    /// [`read`](Self::read), leaving the bytes of the tensors `defer` names on disk (a regular file's
    /// only; a pipe's are read): their places, checked as every tensor's are, and the open file
    /// they can be read from with [`Deferred::read`], even once the file is unlinked.
    pub(crate) fn read_deferring(
        path: impl AsRef<Path>,
        defer: &dyn Fn(&str) -> bool,
    ) -> Result<ReadDeferring, TraceError> {
        let path = path.as_ref().to_path_buf();
        let io = |source: std::io::Error| TraceError::Io {
            path: path.clone(),
            source,
        };
        let bad = |message: String| TraceError::Safetensors {
            path: path.clone(),
            message,
        };
        let mut file = std::fs::File::open(&path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(bad("it is a directory, not a file".to_string()));
        }
        // A regular file's length, to refuse a header's claims before reading; none for a pipe.
        let file_len = meta.is_file().then_some(meta.len());
        let mut reader = std::io::BufReader::new(&mut file);

        let length_bytes = read_up_to(&mut reader, 8, 8).map_err(io)?;
        let Ok(length_bytes) = <[u8; 8]>::try_from(length_bytes.as_slice()) else {
            return Err(bad(format!(
                "the file is {} bytes long, too short for the 8-byte header length a safetensors file starts with",
                length_bytes.len()
            )));
        };
        let header_len = u64::from_le_bytes(length_bytes);
        if header_len > MAX_HEADER_LEN {
            return Err(bad(format!(
                "the header length is {header_len} bytes, more than the {MAX_HEADER_LEN} a safetensors header may have (not a safetensors file?)"
            )));
        }
        if let Some(len) = file_len.filter(|&len| header_len > len.saturating_sub(8)) {
            return Err(bad(format!(
                "the header length is {header_len} bytes but only {} follow it (truncated?)",
                len.saturating_sub(8)
            )));
        }
        let header_len = header_len as usize; // <= MAX_HEADER_LEN
        let header = read_up_to(&mut reader, header_len, header_len).map_err(io)?;
        if header.len() < header_len {
            return Err(bad(format!(
                "the header length is {header_len} bytes but only {} follow it (truncated?)",
                header.len()
            )));
        }
        let header = std::str::from_utf8(&header).map_err(|e| {
            bad(format!(
                "the header is not UTF-8 (invalid byte at offset {})",
                8 + e.valid_up_to()
            ))
        })?;
        let (tensors_info, metadata) = parse_header(header).map_err(bad)?;

        // The data section: the tensors end to end in offset order, nothing before, between or after.
        let mut order: Vec<&TensorInfo> = tensors_info.iter().collect();
        order.sort_by_key(|info| info.offsets);
        let mut end = 0_u64;
        let mut previous: Option<&str> = None;
        for info in &order {
            let (start, stop) = info.offsets;
            if start < end {
                return Err(bad(format!(
                    "tensor `{}`'s data_offsets [{start}, {stop}] overlap tensor `{}`'s, which end at {end}",
                    info.name,
                    previous.unwrap_or("?")
                )));
            }
            if start > end {
                return Err(bad(format!(
                    "bytes {end} to {start} of the data belong to no tensor (tensor `{}` starts at {start}); a safetensors file has no gaps",
                    info.name
                )));
            }
            end = stop;
            previous = Some(&info.name);
        }
        if let Some(len) = file_len {
            let have = len.saturating_sub(8 + header_len as u64);
            if have != end {
                return Err(bad(format!(
                    "the header's tensors take {end} bytes of data but {have} follow the header ({})",
                    if have < end {
                        "truncated?"
                    } else {
                        "bytes after the last tensor"
                    }
                )));
            }
        }

        let mut tensors = BTreeMap::new();
        let mut deferred = BTreeMap::new();
        for info in order {
            let (start, stop) = info.offsets;
            let Some(dtype) = info.dtype else {
                return Err(TraceError::Format {
                    path: path.clone(),
                    message: format!(
                        "tensor `{}` has dtype {}; burnside-trace reads F32, F64, BF16, F16 and I64",
                        info.name, info.dtype_name
                    ),
                });
            };
            let size = (stop - start) as usize; // == the tensor's byte length, which fits usize
            if file_len.is_some() && defer(&info.name) {
                // the file's length was checked against every offset above: the bytes are there
                reader.seek_relative(size as i64).map_err(io)?;
                deferred.insert(
                    info.name.clone(),
                    Deferred {
                        dtype,
                        shape: info.shape.clone(),
                        offset: 8 + header_len as u64 + start,
                        len: size,
                    },
                );
                continue;
            }
            // The buffer starts no larger than what is left of the file (or 64 KiB for a pipe).
            let room = file_len.map_or(1 << 16, |len| {
                len.saturating_sub(8 + header_len as u64 + start)
            });
            let bytes = read_up_to(&mut reader, size, size.min(room as usize)).map_err(io)?;
            if bytes.len() < size {
                return Err(bad(format!(
                    "tensor `{}` needs bytes {start} to {stop} of the data but the file ends at {} (truncated?)",
                    info.name,
                    start + bytes.len() as u64
                )));
            }
            tensors.insert(
                info.name.clone(),
                HostTensor {
                    dtype,
                    shape: info.shape.clone(),
                    bytes,
                },
            );
        }
        if file_len.is_none() && !read_up_to(&mut reader, 1, 1).map_err(io)?.is_empty() {
            return Err(bad(format!(
                "bytes follow the last tensor, which ends at {end} of the data"
            )));
        }
        drop(reader);
        Ok((
            Self {
                path,
                tensors,
                metadata,
            },
            deferred,
            Arc::new(file),
        ))
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

/// A tensor [`SafetensorsFile::read_deferring`] left on disk: where its bytes are in the file.
#[derive(Debug, Clone)]
pub(crate) struct Deferred {
    pub(crate) dtype: HostDType,
    pub(crate) shape: Vec<usize>,
    /// The first byte's offset in the file.
    pub(crate) offset: u64,
    pub(crate) len: usize,
}

impl Deferred {
    /// The tensor, read from `file` (the file it was found in, kept open).
    pub(crate) fn read(&self, file: &std::fs::File) -> std::io::Result<HostTensor> {
        use std::os::unix::fs::FileExt;
        let mut bytes = vec![0_u8; self.len];
        file.read_exact_at(&mut bytes, self.offset)?;
        Ok(HostTensor {
            dtype: self.dtype,
            shape: self.shape.clone(),
            bytes,
        })
    }
}

/// The most a safetensors header may be (the `safetensors` crate's limit).
const MAX_HEADER_LEN: u64 = 100_000_000;

/// Up to `len` bytes of `reader` (fewer at its end), into a buffer that starts at `capacity`
/// and grows only as bytes arrive.
fn read_up_to(reader: &mut impl Read, len: usize, capacity: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(capacity.min(len));
    reader.take(len as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// One tensor's entry in a safetensors header, checked on its own.
#[derive(Debug)]
struct TensorInfo {
    name: String,
    /// `None` for a safetensors dtype burnside-trace does not read.
    dtype: Option<HostDType>,
    dtype_name: String,
    shape: Vec<usize>,
    offsets: (u64, u64),
}

/// The safetensors dtypes and their sizes in bits.
const DTYPE_BITS: &[(&str, usize)] = &[
    ("BOOL", 8),
    ("F4", 4),
    ("F6_E2M3", 6),
    ("F6_E3M2", 6),
    ("U8", 8),
    ("I8", 8),
    ("F8_E5M2", 8),
    ("F8_E4M3", 8),
    ("F8_E8M0", 8),
    ("I16", 16),
    ("U16", 16),
    ("F16", 16),
    ("BF16", 16),
    ("I32", 32),
    ("U32", 32),
    ("F32", 32),
    ("F64", 64),
    ("I64", 64),
    ("U64", 64),
    ("C64", 64),
];

/// A header's tensors (checked one by one: dtype, shape, offsets, byte length) and its
/// `__metadata__`, or what is wrong with it.
fn parse_header(header: &str) -> Result<(Vec<TensorInfo>, BTreeMap<String, String>), String> {
    let value: serde_json::Value =
        serde_json::from_str(header).map_err(|e| format!("the header is not JSON: {e}"))?;
    let serde_json::Value::Object(entries) = value else {
        return Err("the header is JSON but not an object".to_string());
    };
    if let Some(key) = duplicate_key(header) {
        return Err(format!("the header has key {key} twice"));
    }
    let mut metadata = BTreeMap::new();
    let mut tensors = Vec::with_capacity(entries.len());
    for (name, info) in entries {
        if name == "__metadata__" {
            let serde_json::Value::Object(map) = info else {
                return Err(format!(
                    "`__metadata__` is {}, not an object of strings",
                    kind(&info)
                ));
            };
            for (key, value) in map {
                let serde_json::Value::String(value) = value else {
                    return Err(format!(
                        "metadata `{key}` is {}, not a string",
                        kind(&value)
                    ));
                };
                metadata.insert(key, value);
            }
            continue;
        }
        tensors.push(tensor_info(name, &info)?);
    }
    Ok((tensors, metadata))
}

/// One tensor's entry, checked: `{"dtype": .., "shape": [..], "data_offsets": [start, end]}`
/// with `end - start` the byte length of its dtype and shape.
fn tensor_info(name: String, info: &serde_json::Value) -> Result<TensorInfo, String> {
    let serde_json::Value::Object(fields) = info else {
        return Err(format!(
            "tensor `{name}` is {}, not an object with dtype, shape and data_offsets",
            kind(info)
        ));
    };
    let field = |key: &str| {
        fields
            .get(key)
            .ok_or_else(|| format!("tensor `{name}` has no `{key}`"))
    };
    let dtype_name = match field("dtype")? {
        serde_json::Value::String(s) => s.clone(),
        other => {
            return Err(format!(
                "tensor `{name}`'s dtype is {}, not a string",
                kind(other)
            ));
        }
    };
    let Some(&(_, bits)) = DTYPE_BITS.iter().find(|(d, _)| *d == dtype_name) else {
        return Err(format!(
            "tensor `{name}` has dtype `{dtype_name}`, which is no safetensors dtype"
        ));
    };
    let dtype = match dtype_name.as_str() {
        "F32" => Some(HostDType::F32),
        "F64" => Some(HostDType::F64),
        "I64" => Some(HostDType::I64),
        "BF16" => Some(HostDType::BF16),
        "F16" => Some(HostDType::F16),
        _ => None,
    };
    let whole = |v: &serde_json::Value| v.as_u64();
    let shape: Vec<u64> = match field("shape")? {
        serde_json::Value::Array(dims) => dims
            .iter()
            .map(whole)
            .collect::<Option<_>>()
            .ok_or_else(|| {
                format!(
                    "tensor `{name}`'s shape {} is not a list of whole numbers >= 0",
                    field("shape").map(|v| v.to_string()).unwrap_or_default()
                )
            })?,
        other => {
            return Err(format!(
                "tensor `{name}`'s shape is {}, not a list",
                kind(other)
            ));
        }
    };
    let offsets = match field("data_offsets")? {
        serde_json::Value::Array(pair) if pair.len() == 2 => {
            pair.iter().map(whole).collect::<Option<Vec<u64>>>()
        }
        _ => None,
    };
    let Some(&[start, end]) = offsets.as_deref() else {
        return Err(format!(
            "tensor `{name}`'s data_offsets {} are not [start, end], two whole numbers >= 0",
            field("data_offsets")?
        ));
    };
    let too_big =
        || format!("tensor `{name}`'s shape {shape:?} has more elements than memory can address");
    let shape: Vec<usize> = shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| too_big()))
        .collect::<Result<_, _>>()?;
    let elements = shape
        .iter()
        .try_fold(1_usize, |n, &d| n.checked_mul(d))
        .ok_or_else(too_big)?;
    let nbytes = elements
        .checked_mul(bits)
        .map(|b| b.div_ceil(8))
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(too_big)?;
    if end < start {
        return Err(format!(
            "tensor `{name}`'s data_offsets [{start}, {end}] end before they start"
        ));
    }
    if end - start != nbytes {
        return Err(format!(
            "tensor `{name}` is {dtype_name} {shape:?}, {nbytes} bytes, but its data_offsets [{start}, {end}] hold {}",
            end - start
        ));
    }
    Ok(TensorInfo {
        name,
        dtype,
        dtype_name,
        shape,
        offsets: (start, end),
    })
}

/// What kind of JSON value `value` is, for messages.
fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The first key an object of `json` (valid JSON) has twice, as `` `key` `` or
/// `` `key` in `parent` ``; JSON parsers keep the last silently, so the file would hold a
/// tensor or a metadata value nobody can see.
fn duplicate_key(json: &str) -> Option<String> {
    // One entry per open object or list: the object's keys so far (None for a list) and the
    // key it is the value of.
    let mut open: Vec<(Option<BTreeSet<String>>, Option<String>)> = Vec::new();
    let mut last_key: Option<String> = None;
    let mut expect_key = false;
    let bytes = json.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                open.push((Some(BTreeSet::new()), last_key.take()));
                expect_key = true;
            }
            b'[' => {
                open.push((None, last_key.take()));
                expect_key = false;
            }
            b'}' | b']' => {
                open.pop();
                expect_key = false;
            }
            b',' => expect_key = matches!(open.last(), Some((Some(_), _))),
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let raw = json.get(start..=i.min(bytes.len() - 1))?;
                if expect_key {
                    let key: String = serde_json::from_str(raw).ok()?;
                    let (keys, parent) = open.last_mut()?;
                    if !keys.as_mut()?.insert(key.clone()) {
                        return Some(match parent {
                            Some(parent) => format!("`{key}` in `{parent}`"),
                            None => format!("`{key}`"),
                        });
                    }
                    last_key = Some(key);
                    expect_key = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Write tensors and metadata as a safetensors file, atomically: the bytes go to a temporary
/// file in the same directory, which is then renamed over `path`, so a reader never sees half a
/// file and a failed write leaves any previous file in place.
pub(crate) fn write_safetensors<'a>(
    path: impl AsRef<Path>,
    tensors: impl IntoIterator<Item = (&'a String, &'a HostTensor)>,
    metadata: &BTreeMap<String, String>,
) -> Result<(), TraceError> {
    let path = path.as_ref();
    let bad = |message: String| TraceError::Safetensors {
        path: path.to_path_buf(),
        message,
    };
    let mut views = Vec::new();
    for (name, tensor) in tensors {
        let dtype = match tensor.dtype {
            HostDType::F32 => Dtype::F32,
            HostDType::F64 => Dtype::F64,
            HostDType::I64 => Dtype::I64,
            HostDType::BF16 => Dtype::BF16,
            HostDType::F16 => Dtype::F16,
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
        .map_err(|source| no_room(source, bytes.len()))
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io(source));
    }
    Ok(())
}

/// A write that failed for want of room (a full disk, a full quota, a file-size limit: EFBIG is what a
/// write past `ulimit -f` gets when SIGXFSZ is ignored) says how many bytes the file needed; any other
/// error is returned as it is.
fn no_room(source: std::io::Error, needed: usize) -> std::io::Error {
    no_room_with(source, &format!("{needed} bytes"))
}

/// [`no_room`] for a file written as it was recorded, whose size is not known when the room runs
/// out: it needed more than the `written` bytes that reached the temporary file (now removed).
pub(crate) fn no_room_after(source: std::io::Error, written: u64) -> std::io::Error {
    no_room_with(source, &format!("more than {written} bytes"))
}

fn no_room_with(source: std::io::Error, needed: &str) -> std::io::Error {
    use std::io::ErrorKind;
    let what = match source.kind() {
        ErrorKind::StorageFull => "no space left on the device",
        ErrorKind::QuotaExceeded => "disk quota exceeded",
        ErrorKind::FileTooLarge => {
            "larger than the file-size limit (ulimit -f) or the file system allows"
        }
        _ => return source,
    };
    std::io::Error::new(
        source.kind(),
        format!("{what}: {needed} to write; nothing was written"),
    )
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
    fn a_write_without_room_names_the_bytes_needed_and_other_errors_pass_through() {
        use std::io::{Error, ErrorKind};
        let full = no_room(Error::from_raw_os_error(28), 4096); // ENOSPC
        assert_eq!(full.kind(), ErrorKind::StorageFull);
        assert_eq!(
            full.to_string(),
            "no space left on the device: 4096 bytes to write; nothing was written"
        );
        let limit = no_room(Error::from_raw_os_error(27), 10); // EFBIG
        assert_eq!(limit.kind(), ErrorKind::FileTooLarge);
        assert!(
            limit
                .to_string()
                .ends_with("10 bytes to write; nothing was written")
        );
        let denied = no_room(Error::from(ErrorKind::PermissionDenied), 10);
        assert_eq!(denied.kind(), ErrorKind::PermissionDenied);
    }

    #[test]
    fn a_write_into_a_missing_directory_is_an_error_not_a_panic() {
        let path = scratch("no/such/dir/trace.safetensors");
        let result = write_safetensors(&path, &BTreeMap::new(), &BTreeMap::new());
        assert!(matches!(result, Err(TraceError::Io { .. })));
    }
}

//! A safetensors file written tensor by tensor as a trace is recorded, so a recording holds the
//! loop's own memory plus a bounded buffer, not every tensor of every step.
//!
//! The bytes go to a temporary file beside the output (`.{file name}.{pid}.{random hex}.partial`),
//! with room reserved for the header; the data follows the reservation. [`StreamWriter::finish`]
//! writes the header into its room (padded with spaces), syncs the file and renames it over the
//! output. A header larger than its room is written at the head of a second temporary file,
//! the data copied after it (`std::io::copy`, which the kernel does without reading the data
//! into memory where it can), and that file is renamed instead: only slower. A writer dropped
//! unfinished, and any error, removes its temporary file: the output never holds half a trace
//! and a previous file there stays. A process killed outright (SIGKILL, SIGINT without a
//! handler) may leave the `.partial` file, never a file at the output.

mod background;
mod temp_file;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::safetensors_file::no_room_after;
use crate::{ALIASES_VERSION, HostDType, HostTensor, STATISTICS_VERSION, Statistics, TraceError};
use background::Background;
use temp_file::{create_temp, sync_dir};

/// Header room every file gets, before the room per expected tensor.
const HEADER_BASE: usize = 65536;
/// Header room per expected tensor (an entry is ~100-150 bytes of JSON).
const HEADER_PER_TENSOR: usize = 192;
/// The metadata's share of the header room (the recorder's keys, a few KiB for a large model).
const METADATA_ESTIMATE: usize = 16384;
/// Tensors smaller than this that would break the data's 8-byte alignment wait for the finish.
const SMALL: usize = 64 * 1024;
/// The most bytes held back for alignment; beyond it tensors are written at once, aligned or not.
const HELD_BOUND: usize = 16 * 1024 * 1024;

/// The header room for `expected_tensors` tensors: a multiple of 8.
pub(crate) fn header_reserve(expected_tensors: usize) -> usize {
    round_up_8(
        HEADER_BASE
            .saturating_add(HEADER_PER_TENSOR.saturating_mul(expected_tensors))
            .saturating_add(METADATA_ESTIMATE),
    )
}

fn round_up_8(n: usize) -> usize {
    n.div_ceil(8).saturating_mul(8)
}

/// One tensor's header entry.
#[derive(Debug)]
struct Entry {
    dtype: HostDType,
    shape: Vec<usize>,
    start: u64,
    end: u64,
}

/// The data section's writer, with what the header will say.
#[derive(Debug)]
pub(crate) struct StreamWriter {
    /// The output the file becomes at the finish.
    path: PathBuf,
    /// The temporary file, while it exists.
    temp: Option<PathBuf>,
    /// Its data's writer thread, until the finish (or a failure) takes the file back.
    file: Option<Background>,
    /// The header's room, in bytes after the 8-byte length (a multiple of 8).
    reserve: usize,
    /// Data bytes written so far (the next tensor's start).
    offset: u64,
    entries: BTreeMap<String, Entry>,
    /// Small tensors held back for alignment, and their bytes.
    held: Vec<(String, HostTensor)>,
    held_bytes: usize,
    held_names: BTreeSet<String>,
    /// Alias name -> target name (a tensor of this file).
    aliases: BTreeMap<String, String>,
    /// Tensors recorded as their statistics only (metadata `statistics`), by name.
    statistics: BTreeMap<String, Statistics>,
    /// Set once an I/O error removed the temporary file: the message every later call returns.
    failed: Option<String>,
    /// The file, all its data written, while the finish writes the header.
    done: Option<BufWriter<File>>,
}

impl StreamWriter {
    /// Start a file for `path`, with header room for `expected_tensors` tensors (an estimate:
    /// more only wastes a little padding, fewer makes the finish copy the data once).
    #[cfg(test)]
    pub(crate) fn create(path: &Path, expected_tensors: usize) -> Result<Self, TraceError> {
        Self::create_with_reserve(path, header_reserve(expected_tensors))
    }

    /// As [`create`](Self::create), with the header room given (tests: a room too small).
    pub(crate) fn create_with_reserve(path: &Path, reserve: usize) -> Result<Self, TraceError> {
        let reserve = round_up_8(reserve);
        let io = |source: std::io::Error| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let (temp, file) = create_temp(path).map_err(io)?;
        let mut writer = Self {
            path: path.to_path_buf(),
            temp: Some(temp),
            file: None,
            reserve,
            offset: 0,
            entries: BTreeMap::new(),
            held: Vec::new(),
            held_bytes: 0,
            held_names: BTreeSet::new(),
            aliases: BTreeMap::new(),
            statistics: BTreeMap::new(),
            failed: None,
            done: None,
        };
        // The data starts after the length and the header's room.
        let start = 8 + reserve as u64;
        let mut file = BufWriter::with_capacity(1 << 20, file);
        if let Err(source) = file.seek(SeekFrom::Start(start)) {
            return Err(writer.fail(source));
        }
        match Background::start(file, start) {
            Ok(background) => writer.file = Some(background),
            Err(source) => return Err(writer.fail(source)),
        }
        Ok(writer)
    }

    /// The output path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file being written (`None` once finished or failed).
    #[cfg(test)]
    pub(crate) fn temp(&self) -> Option<&Path> {
        self.temp.as_deref()
    }

    /// Whether `name` is in the file already (a tensor written or held, an alias, or statistics).
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
            || self.held_names.contains(name)
            || self.aliases.contains_key(name)
            || self.statistics.contains_key(name)
    }

    /// Every name in the file so far, tensors and aliases, sorted.
    #[cfg(test)]
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self
            .entries
            .keys()
            .chain(self.held_names.iter())
            .chain(self.aliases.keys())
            .chain(self.statistics.keys())
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.into_iter()
    }

    /// The aliases so far (alias -> target).
    pub(crate) fn aliases(&self) -> &BTreeMap<String, String> {
        &self.aliases
    }

    /// The tensors recorded as statistics so far.
    pub(crate) fn statistics(&self) -> &BTreeMap<String, Statistics> {
        &self.statistics
    }

    /// Record tensor `name` as its statistics only (no bytes in the file: an entry of metadata
    /// `statistics`). A name already in the file is an error.
    pub(crate) fn add_statistics(
        &mut self,
        name: String,
        statistics: Statistics,
    ) -> Result<(), TraceError> {
        self.check_name(&name)?;
        self.statistics.insert(name, statistics);
        Ok(())
    }

    fn check_name(&mut self, name: &str) -> Result<(), TraceError> {
        self.check_ok()?;
        if name.is_empty() || name == "__metadata__" {
            return Err(TraceError::Mismatch {
                name: name.to_string(),
                message: "is not a tensor name a trace may hold".to_string(),
            });
        }
        if self.contains(name) {
            return Err(TraceError::Mismatch {
                name: name.to_string(),
                message: "recorded twice: a trace holds each tensor once (record each stage once per step, and each tapped layer under its own name)".to_string(),
            });
        }
        Ok(())
    }

    /// Wait for the bytes handed over so far to be written (the thread takes the next hand-off
    /// only once the previous one is); then [`check_ok`](Self::check_ok).
    pub(crate) fn settle(&mut self) -> Result<(), TraceError> {
        if let Some(file) = self.file.as_mut()
            && let Err(source) = file.write(Vec::new())
        {
            return Err(self.fail(source));
        }
        self.check_ok()
    }

    /// The error that stopped the file, if any: an earlier call's, or a write the thread has
    /// failed since (it is seen at the next call, or at the finish).
    pub(crate) fn check_ok(&mut self) -> Result<(), TraceError> {
        if let Some(file) = self.file.as_mut()
            && file.stopped()
            && let Err(source) = file.join()
        {
            return Err(self.fail(source));
        }
        match &self.failed {
            Some(message) => Err(TraceError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(message.clone()),
            }),
            None => Ok(()),
        }
    }

    /// Add tensor `name`: written now if it keeps the data aligned (or is large), else held
    /// until the finish. A name already in the file is an error.
    pub(crate) fn add(&mut self, name: String, tensor: HostTensor) -> Result<(), TraceError> {
        self.check_name(&name)?;
        let size = tensor.bytes.len();
        let itemsize = itemsize(tensor.dtype) as u64;
        let aligned_start = self.offset.is_multiple_of(itemsize);
        let stays_aligned = (self.offset + size as u64).is_multiple_of(8);
        if aligned_start && stays_aligned {
            return self.write_now(name, tensor);
        }
        if size < SMALL && self.held_bytes + size <= HELD_BOUND {
            self.held_bytes += size;
            self.held_names.insert(name.clone());
            self.held.push((name, tensor));
            return Ok(());
        }
        self.write_now(name, tensor)
    }

    /// Record `name` as an alias of `target`, a tensor (not an alias) already in the file.
    pub(crate) fn alias(&mut self, name: String, target: &str) -> Result<(), TraceError> {
        self.check_name(&name)?;
        if !(self.entries.contains_key(target) || self.held_names.contains(target)) {
            return Err(TraceError::Mismatch {
                name,
                message: format!(
                    "cannot be an alias of `{target}`, which is no tensor of the file"
                ),
            });
        }
        self.aliases.insert(name, target.to_string());
        Ok(())
    }

    /// Write `tensor`'s bytes at the end of the data (the writer thread does, while the recording
    /// goes on); its buffer comes back for later tensors'.
    fn write_now(&mut self, name: String, tensor: HostTensor) -> Result<(), TraceError> {
        let Some(file) = self.file.as_mut() else {
            return self.check_ok();
        };
        for spare in file.written.try_iter() {
            crate::host_tensor::recycle(spare);
        }
        let size = tensor.bytes.len() as u64;
        if let Err(source) = file.write(tensor.bytes) {
            return Err(self.fail(source));
        }
        let start = self.offset;
        self.offset += size;
        self.entries.insert(
            name,
            Entry {
                dtype: tensor.dtype,
                shape: tensor.shape,
                start,
                end: self.offset,
            },
        );
        Ok(())
    }

    /// Remove the temporary file after an I/O error; the error, as the one line a port prints
    /// (a full disk says how much had been written).
    fn fail(&mut self, source: std::io::Error) -> TraceError {
        self.discard();
        let source = no_room_after(source, 8 + self.reserve as u64 + self.offset);
        self.failed = Some(source.to_string());
        TraceError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Close and remove the temporary file, if any.
    fn discard(&mut self) {
        if let Some(file) = self.file.take()
            && let Ok(file) = file.stop()
        {
            // the buffered bytes are not wanted: drop the file without flushing them
            let (file, _) = file.into_parts();
            drop(file);
        }
        if let Some(temp) = self.temp.take() {
            let _ = std::fs::remove_file(temp);
        }
    }

    /// Write the held tensors, the header (`metadata` plus `aliases` and version 2 if there are
    /// any, `statistics` and version 3 if there are any), sync, and rename the file over the
    /// output.
    pub(crate) fn finish(
        mut self,
        mut metadata: BTreeMap<String, String>,
    ) -> Result<(), TraceError> {
        self.check_ok()?;
        // Held tensors, the largest elements first, so 8-byte ones stay 8-aligned.
        let mut held = std::mem::take(&mut self.held);
        held.sort_by_key(|(_, t)| std::cmp::Reverse(itemsize(t.dtype)));
        for (name, tensor) in held {
            self.held_names.remove(&name);
            self.write_now(name, tensor)?;
        }
        // every byte written: the file back from the writer thread
        let stopped = self.file.take().map(Background::stop);
        match stopped {
            Some(Ok(file)) => self.done = Some(file),
            Some(Err(source)) => return Err(self.fail(source)),
            None => self.check_ok()?,
        }
        if !self.aliases.is_empty() {
            metadata.insert(
                "aliases".to_string(),
                serde_json::to_string(&self.aliases).expect("a map of strings is JSON"),
            );
            metadata.insert("burnside.version".to_string(), ALIASES_VERSION.to_string());
        }
        if !self.statistics.is_empty() {
            metadata.insert("statistics".to_string(), statistics_json(&self.statistics));
            metadata.insert(
                "burnside.version".to_string(),
                STATISTICS_VERSION.to_string(),
            );
        }
        let header = self.header(&metadata);
        let result = if header.len() <= self.reserve {
            self.finish_in_place(header)
        } else {
            self.finish_by_copy(header)
        };
        if let Err(source) = result {
            return Err(self.fail(source));
        }
        Ok(())
    }

    /// The JSON header: `__metadata__` and every tensor's entry.
    fn header(&self, metadata: &BTreeMap<String, String>) -> Vec<u8> {
        let mut object = Map::new();
        object.insert("__metadata__".to_string(), json!(metadata));
        for (name, entry) in &self.entries {
            object.insert(
                name.clone(),
                json!({
                    "dtype": dtype_name(entry.dtype),
                    "shape": entry.shape,
                    "data_offsets": [entry.start, entry.end],
                }),
            );
        }
        Value::Object(object).to_string().into_bytes()
    }

    /// The header in its reserved room, padded with spaces; sync; rename.
    fn finish_in_place(&mut self, mut header: Vec<u8>) -> std::io::Result<()> {
        header.resize(self.reserve, b' ');
        let mut file = self
            .done
            .take()
            .expect("an unfailed writer has its file")
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&(self.reserve as u64).to_le_bytes())?;
        file.write_all(&header)?;
        file.sync_all()?;
        drop(file);
        let temp = self.temp.as_ref().expect("an unfailed writer has its file");
        std::fs::rename(temp, &self.path)?;
        self.temp = None;
        sync_dir(&self.path);
        Ok(())
    }

    /// The header did not fit its room: a second temporary file with the exact header, the data
    /// copied after it; rename that one, remove the first.
    fn finish_by_copy(&mut self, mut header: Vec<u8>) -> std::io::Result<()> {
        header.resize(round_up_8(header.len()), b' ');
        let mut old = self
            .done
            .take()
            .expect("an unfailed writer has its file")
            .into_inner()
            .map_err(|e| e.into_error())?;
        let (new_temp, mut new) = create_temp(&self.path)?;
        let copied = (|| {
            new.write_all(&(header.len() as u64).to_le_bytes())?;
            new.write_all(&header)?;
            old.seek(SeekFrom::Start(8 + self.reserve as u64))?;
            let copied = std::io::copy(&mut (&old).take(self.offset), &mut new)?;
            if copied != self.offset {
                return Err(std::io::Error::other(format!(
                    "copied {copied} of {} data bytes into the file with the larger header",
                    self.offset
                )));
            }
            new.sync_all()?;
            drop(new);
            std::fs::rename(&new_temp, &self.path)
        })();
        if copied.is_err() {
            let _ = std::fs::remove_file(&new_temp);
            return copied;
        }
        drop(old);
        if let Some(temp) = self.temp.take() {
            let _ = std::fs::remove_file(temp);
        }
        sync_dir(&self.path);
        Ok(())
    }
}

impl Drop for StreamWriter {
    fn drop(&mut self) {
        self.discard();
    }
}

fn itemsize(dtype: HostDType) -> usize {
    dtype.size()
}

/// Metadata `statistics`: each statistics-only tensor's entry, by name (JSON text).
pub(crate) fn statistics_json(statistics: &BTreeMap<String, Statistics>) -> String {
    let object: Map<String, Value> = statistics
        .iter()
        .map(|(name, s)| (name.clone(), s.to_json()))
        .collect();
    Value::Object(object).to_string()
}

/// The safetensors name of a dtype.
pub(crate) fn dtype_name(dtype: HostDType) -> &'static str {
    match dtype {
        HostDType::F32 => "F32",
        HostDType::F64 => "F64",
        HostDType::I64 => "I64",
        HostDType::BF16 => "BF16",
        HostDType::F16 => "F16",
    }
}

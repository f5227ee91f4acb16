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

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use serde_json::{Map, Value, json};

use crate::safetensors_file::no_room_after;
use crate::{ALIASES_VERSION, HostDType, HostTensor, STATISTICS_VERSION, Statistics, TraceError};

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

/// The thread that writes a file's data, one buffer at a time in the order given, while the
/// recording goes on: the copy into the page cache (at GPT-2 size a tenth of the recording's
/// time) overlaps the training loop's next tensors instead of adding to it. A hand-off waits for
/// the thread to take the buffer, so at most the tensor being written and the next one are out
/// beside the loop's memory. Each buffer written comes back on `written` for reuse.
#[derive(Debug)]
struct Background {
    to_write: Option<SyncSender<Vec<u8>>>,
    written: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<(BufWriter<File>, std::io::Result<()>)>>,
}

impl Background {
    fn start(mut file: BufWriter<File>, start: u64) -> std::io::Result<Self> {
        let (to_write, to_thread) = sync_channel::<Vec<u8>>(0);
        let (back, written) = channel::<Vec<u8>>();
        let thread = std::thread::Builder::new()
            .name("burnside-trace writer".to_string())
            .spawn(move || {
                let mut writeback = Writeback::new(start);
                for bytes in to_thread {
                    if let Err(e) = file.write_all(&bytes) {
                        return (file, Err(e));
                    }
                    writeback.wrote(&file, bytes.len() as u64);
                    let _ = back.send(bytes);
                }
                (file, Ok(()))
            })?;
        Ok(Self {
            to_write: Some(to_write),
            written,
            thread: Some(thread),
        })
    }

    /// Whether the thread has stopped before it was told to: a write failed.
    fn stopped(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Hand `bytes` to the thread; the error of an earlier write, if it failed.
    fn write(&mut self, bytes: Vec<u8>) -> std::io::Result<()> {
        let sent = self.to_write.as_ref().map(|to_write| to_write.send(bytes));
        match sent {
            Some(Ok(())) => Ok(()),
            // the thread stopped at an error: its error
            _ => self
                .join()
                .and(Err(std::io::Error::other("the writer thread stopped"))),
        }
    }

    /// Wait for every byte handed over to be written; the file, or the first write's error.
    fn stop(mut self) -> std::io::Result<BufWriter<File>> {
        self.to_write = None;
        let (file, result) = self.wait()?;
        result.map(|()| file)
    }

    fn join(&mut self) -> std::io::Result<()> {
        self.to_write = None;
        self.wait()?.1
    }

    fn wait(&mut self) -> std::io::Result<(BufWriter<File>, std::io::Result<()>)> {
        let thread = self
            .thread
            .take()
            .ok_or_else(|| std::io::Error::other("the writer thread stopped"))?;
        thread
            .join()
            .map_err(|_| std::io::Error::other("the writer thread panicked"))
    }
}

/// Every [`WRITEBACK_EVERY`] bytes written, the kernel is told to start writing them to the
/// disk (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`: no wait, the pages stay in the page
/// cache for compare to read), so the disk works while the model computes and the finish's fsync
/// has little left to wait for. Linux only: elsewhere, and on a file system that refuses the call,
/// nothing is asked and the fsync writes it all. The Python writer does the same
/// (`burnside.trace.stream`); dropping the pages as well was measured and not kept (compare then
/// read the trace back from the disk, slower overall).
const WRITEBACK_EVERY: u64 = 64 << 20;

#[derive(Debug)]
struct Writeback {
    /// The file's bytes handed to the kernel so far, and the end of those it was told to write out.
    written: u64,
    told: u64,
    refused: bool,
    every: u64,
}

impl Writeback {
    fn new(start: u64) -> Self {
        Self::every(start, WRITEBACK_EVERY)
    }

    fn every(start: u64, every: u64) -> Self {
        Self {
            written: start,
            told: 0,
            refused: false,
            every,
        }
    }

    /// `n` more bytes were handed to `file`; past a stretch, the kernel is told to write out those
    /// it has (not those still in the buffer). A refusal is not an error: the fsync writes them.
    fn wrote(&mut self, file: &BufWriter<File>, n: u64) {
        self.written += n;
        if self.refused || self.written - self.told < self.every {
            return;
        }
        let end = self.written - file.buffer().len() as u64;
        self.refused = !start_writeback(file.get_ref(), self.told, end - self.told);
        self.told = end;
    }
}

/// Ask the kernel to start writing `len` bytes of `file` at `from` to the disk; false if refused.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, from: u64, len: u64) -> bool {
    use std::os::fd::AsRawFd;
    let (Ok(from), Ok(len)) = (i64::try_from(from), i64::try_from(len)) else {
        return false;
    };
    // SAFETY: the descriptor is the open file's own, and the call only reads its arguments.
    unsafe { libc::sync_file_range(file.as_raw_fd(), from, len, libc::SYNC_FILE_RANGE_WRITE) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _from: u64, _len: u64) -> bool {
    false
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

/// A new temporary file beside `path`: `.{file name}.{pid}.{random hex}.partial`.
fn create_temp(path: &Path) -> std::io::Result<(PathBuf, File)> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?
        .to_string_lossy()
        .into_owned();
    loop {
        let temp = dir.join(format!(
            ".{file_name}.{}.{:016x}.partial",
            std::process::id(),
            random_u64()
        ));
        match File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// 64 random bits from the standard library's randomly keyed hasher (no random crate needed).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// Sync the directory holding `path`, so the rename survives a crash (best effort).
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(dir) = File::open(dir) {
            let _ = dir.sync_all();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SafetensorsFile;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("burnside-stream-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn partials(path: &Path) -> Vec<String> {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!(".{name}.")) && n.ends_with(".partial"))
            .collect()
    }

    fn meta() -> BTreeMap<String, String> {
        [("k".to_string(), "v".to_string())].into_iter().collect()
    }

    /// f32 tensors of odd lengths (4 mod 8 bytes) mixed with f64 and i64 ones.
    fn mixed() -> Vec<(String, HostTensor)> {
        let f64s = |n: usize| HostTensor {
            dtype: HostDType::F64,
            shape: vec![n],
            bytes: (0..n)
                .flat_map(|i| (i as f64 * 0.5).to_le_bytes())
                .collect(),
        };
        vec![
            ("a.loss".into(), HostTensor::from_f32(&[0.25], vec![])),
            ("b.big".into(), f64s(20_000)),
            (
                "c.odd".into(),
                HostTensor::from_f32(&[1.0, 2.0, 3.0], vec![3]),
            ),
            ("d.f64".into(), f64s(3)),
            ("e.step".into(), HostTensor::from_i64(&[7], vec![])),
            ("f.even".into(), HostTensor::from_f32(&[1.0, -0.0], vec![2])),
        ]
    }

    #[test]
    fn every_tensor_reads_back_and_8_byte_elements_are_8_aligned() {
        let path = scratch("aligned.safetensors");
        let mut writer = StreamWriter::create(&path, 6).unwrap();
        let temp = writer.temp().unwrap().to_path_buf();
        assert!(
            temp.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(".partial")
        );
        assert_eq!(temp.parent(), path.parent(), "beside the output");
        for (name, tensor) in mixed() {
            writer.add(name, tensor).unwrap();
        }
        assert!(!path.exists(), "nothing at the output before the finish");
        writer.finish(meta()).unwrap();
        assert!(!temp.exists());
        let file = SafetensorsFile::read(&path).unwrap();
        assert_eq!(file.tensors, mixed().into_iter().collect());
        assert_eq!(file.meta("k").unwrap(), "v");
        // the header: a multiple of 8, padded with spaces, the reservation's size
        let bytes = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(n, header_reserve(6));
        assert_eq!(n % 8, 0);
        assert_eq!(bytes[8 + n - 1], b' ');
        let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        for (name, entry) in header.as_object().unwrap() {
            if name == "__metadata__" {
                continue;
            }
            let start = entry["data_offsets"][0].as_u64().unwrap();
            let size = if entry["dtype"] == "F32" { 4 } else { 8 };
            assert_eq!((8 + n as u64 + start) % size, 0, "{name} at {start}");
        }
        let parsed = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(parsed.len(), 6);
    }

    #[test]
    fn a_header_larger_than_its_room_is_written_by_copying_the_data() {
        let path = scratch("overflow.safetensors");
        let mut writer = StreamWriter::create_with_reserve(&path, 64).unwrap();
        let names: Vec<String> = (0..50).map(|i| format!("step{i}.params_after.w")).collect();
        let tensor = |i: usize| HostTensor::from_f32(&[i as f32, 1.0], vec![2]);
        for (i, name) in names.iter().enumerate() {
            writer.add(name.clone(), tensor(i)).unwrap();
        }
        writer
            .alias("step9.params_before.w".into(), &names[8])
            .unwrap();
        writer.finish(meta()).unwrap();
        assert!(partials(&path).is_empty(), "{:?}", partials(&path));
        let bytes = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert!(n > 64 && n.is_multiple_of(8), "{n}");
        let file = SafetensorsFile::read(&path).unwrap();
        for (i, name) in names.iter().enumerate() {
            assert_eq!(file.tensors[name], tensor(i));
        }
        assert_eq!(file.meta("burnside.version").unwrap(), "2");
        assert_eq!(
            file.meta("aliases").unwrap(),
            r#"{"step9.params_before.w":"step8.params_after.w"}"#
        );
        assert_eq!(
            safetensors::SafeTensors::deserialize(&bytes).unwrap().len(),
            50
        );
    }

    #[test]
    fn a_writer_dropped_unfinished_leaves_neither_output_nor_partial_and_keeps_the_old_file() {
        let path = scratch("dropped.safetensors");
        std::fs::write(&path, b"previous").unwrap();
        let mut writer = StreamWriter::create(&path, 1).unwrap();
        writer
            .add("x".into(), HostTensor::from_f32(&[1.0; 100], vec![100]))
            .unwrap();
        assert_eq!(partials(&path).len(), 1);
        drop(writer);
        assert!(partials(&path).is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), b"previous");
    }

    #[test]
    fn duplicates_bad_names_and_aliases_to_nothing_are_refused() {
        let path = scratch("dupes.safetensors");
        let mut writer = StreamWriter::create(&path, 2).unwrap();
        let t = || HostTensor::from_f32(&[1.0, 2.0], vec![2]);
        writer.add("a".into(), t()).unwrap();
        writer
            .add("s".into(), HostTensor::from_f32(&[1.0], vec![]))
            .unwrap(); // held
        let again = writer.add("a".into(), t()).unwrap_err().to_string();
        assert!(again.starts_with("tensor `a`: recorded twice"), "{again}");
        assert!(writer.add("s".into(), t()).is_err(), "a held one counts");
        assert!(writer.add("__metadata__".into(), t()).is_err());
        assert!(writer.alias("b".into(), "missing").is_err());
        writer.alias("b".into(), "a").unwrap();
        assert!(
            writer.alias("c".into(), "b").is_err(),
            "never an alias of an alias"
        );
        assert!(
            writer.add("b".into(), t()).is_err(),
            "an alias's name is taken"
        );
        assert_eq!(writer.names().collect::<Vec<_>>(), vec!["a", "b", "s"]);
    }

    #[test]
    fn statistics_entries_go_to_the_metadata_as_version_3_and_take_their_names() {
        let path = scratch("statistics.safetensors");
        let mut writer = StreamWriter::create(&path, 4).unwrap();
        let big = HostTensor::from_f32(&[1.0, -2.0, 0.5, 4.0], vec![2, 2]);
        let stats = Statistics::of(&big);
        writer
            .add("step0.params_after.w".into(), big.clone())
            .unwrap();
        writer
            .alias("step1.params_before.w".into(), "step0.params_after.w")
            .unwrap();
        writer
            .add_statistics("step1.params_after.w".into(), stats.clone())
            .unwrap();
        assert!(writer.contains("step1.params_after.w"));
        let again = writer.add("step1.params_after.w".into(), big.clone());
        assert!(again.unwrap_err().to_string().contains("recorded twice"));
        assert!(
            writer
                .alias("step2.params_before.w".into(), "step1.params_after.w")
                .is_err(),
            "statistics are no tensor an alias may name"
        );
        writer.finish(meta()).unwrap();
        let file = SafetensorsFile::read(&path).unwrap();
        assert_eq!(file.meta("burnside.version").unwrap(), "3");
        assert!(file.meta("aliases").is_ok(), "aliases kept beside");
        assert_eq!(file.tensors.len(), 1);
        let entries: Value = serde_json::from_str(file.meta("statistics").unwrap()).unwrap();
        assert_eq!(entries["step1.params_after.w"], stats.to_json());
        assert_eq!(
            entries["step1.params_after.w"]["xxh3"],
            format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&big.bytes))
        );
    }

    #[test]
    fn the_disk_is_told_to_write_out_what_was_written_in_stretches_in_order() {
        let path = scratch("writeback.bin");
        let mut file = BufWriter::with_capacity(1 << 10, File::create(&path).unwrap());
        let mut writeback = Writeback::every(0, 4096);
        let mut told = Vec::new();
        for n in [100_usize, 5000, 3000, 3000, 20_000, 10] {
            file.write_all(&vec![7_u8; n]).unwrap();
            let before = writeback.told;
            writeback.wrote(&file, n as u64);
            if writeback.told != before {
                told.push((before, writeback.told));
            }
        }
        assert!(
            !writeback.refused,
            "the kernel refused sync_file_range on a plain file"
        );
        // each stretch starts where the last ended and ends at bytes the kernel has (not the buffer's)
        assert_eq!(told.first().map(|t| t.0), Some(0));
        assert!(told.windows(2).all(|w| w[0].1 == w[1].0), "{told:?}");
        assert!(told.len() >= 3, "{told:?}");
        assert!(told.iter().all(|&(_, end)| end <= 31_110));
        drop(file);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_missing_directory_is_an_io_error_naming_the_output() {
        let path = scratch("no/such/dir/trace.safetensors");
        let error = StreamWriter::create(&path, 1).unwrap_err();
        assert!(matches!(error, TraceError::Io { .. }));
        assert!(error.to_string().starts_with(&path.display().to_string()));
    }
}

use std::path::{Path, PathBuf};
use std::sync::MutexGuard;

use super::TraceRecorder;
use super::aliasing::{split_step, stream_put};
use crate::stream_writer::StreamWriter;
use crate::{HostTensor, TraceError, write_safetensors};
use std::collections::BTreeMap;

/// Where a recorder's tensors go.
#[derive(Debug)]
pub(super) enum Sink {
    /// Kept in `tensors`, written by `write`.
    Memory,
    /// Written to the file as they are recorded (boxed: the writer is large beside the others).
    File(Box<StreamWriter>),
    /// The streamed file was finished (renamed to this path).
    Finished(PathBuf),
}

impl TraceRecorder {
    /// From now on, write every tensor recorded to the trace file `path` at once (a temporary
    /// file beside it, `.{name}.{pid}.{hex}.partial`), instead of keeping it in memory;
    /// [`write`](Self::write) with the same path finishes the file and renames it to `path`.
    /// A recorder dropped before that (an error, a panic) removes the temporary file: `path`
    /// never holds half a trace, and a file already there stays.
    ///
    /// `expected_tensors` is an estimate of the tensors the trace will hold (steps x tensors
    /// per step), for the room reserved for the file's header: more wastes a little padding,
    /// fewer only makes `write` copy the data once into a file with a larger header. Tensors
    /// recorded before this call go to the file first. A name recorded twice is an error for a
    /// streaming recorder (in memory the second replaces the first).
    pub fn stream_to(
        &mut self,
        path: impl AsRef<Path>,
        expected_tensors: usize,
    ) -> Result<(), TraceError> {
        self.stream_to_reserving(path, expected_tensors, 0)
    }

    /// [`stream_to`](Self::stream_to) with `metadata_bytes` more header room, for metadata
    /// larger than the usual few KiB (a captured graph's JSON, known once batch 0 is captured).
    pub(crate) fn stream_to_reserving(
        &mut self,
        path: impl AsRef<Path>,
        expected_tensors: usize,
        metadata_bytes: usize,
    ) -> Result<(), TraceError> {
        let path = path.as_ref();
        if let Some(error) = self.not_streaming("stream_to") {
            return Err(error);
        }
        let reserve =
            crate::stream_writer::header_reserve(expected_tensors.max(self.tensors.len()))
                .saturating_add(metadata_bytes);
        let mut writer = StreamWriter::create_with_reserve(path, reserve)?;
        let mut earlier: Vec<(String, HostTensor)> =
            std::mem::take(&mut self.tensors).into_iter().collect();
        // step by step, so step k-1's params_after is seen before step k's params_before
        earlier.sort_by_cached_key(|(name, _)| (split_step(name).map(|(k, _)| k), name.clone()));
        for (name, tensor) in earlier {
            stream_put(&mut writer, &mut self.after, name, tensor)?;
        }
        for (name, statistics) in std::mem::take(&mut self.statistics) {
            writer.add_statistics(name, statistics)?;
        }
        *self.sink.get_mut().unwrap_or_else(|e| e.into_inner()) = Sink::File(Box::new(writer));
        Ok(())
    }

    /// `None` if the recorder keeps its tensors in memory, else the error for `call`.
    fn not_streaming(&mut self, call: &str) -> Option<TraceError> {
        match &*self.sink.get_mut().unwrap_or_else(|e| e.into_inner()) {
            Sink::Memory => None,
            Sink::File(writer) => Some(TraceError::Setup(format!(
                "{call}: the recorder streams to {} already",
                writer.path().display()
            ))),
            Sink::Finished(path) => Some(TraceError::Setup(format!(
                "{call}: the trace was written to {} already",
                path.display()
            ))),
        }
    }

    pub(super) fn sink(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether tensor `name` (a full name, `step0.inputs.x`) was recorded, in full or as
    /// statistics, streaming or not.
    pub fn contains(&self, name: &str) -> bool {
        match &*self.sink() {
            Sink::Memory => self.tensors.contains_key(name) || self.statistics.contains_key(name),
            Sink::File(writer) => writer.contains(name),
            Sink::Finished(_) => false,
        }
    }

    /// The tensors recorded so far, by full name (`step0.logits`, ...), for a recorder that keeps
    /// them in memory; a recorder streaming to a file ([`stream_to`](Self::stream_to)) holds
    /// none here (ask [`contains`](Self::contains)).
    pub fn tensors(&self) -> &BTreeMap<String, HostTensor> {
        &self.tensors
    }

    /// Write the trace to `path` (safetensors), atomically, after checking it is complete
    /// ([`metadata`](Self::metadata)); for a streaming recorder, finish the file
    /// [`stream_to`](Self::stream_to) started (`path` must be the same).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), TraceError> {
        let path = path.as_ref();
        if let Sink::File(writer) = &mut *self.sink() {
            // a write that failed since the last tensor: its error, not what the trace lacks
            writer.settle()?;
        }
        let metadata = self.metadata()?;
        let mut sink = self.sink();
        match &*sink {
            Sink::Memory => {
                let aliases = self.aliases_in(&sink);
                let tensors = self
                    .tensors
                    .iter()
                    .filter(|(name, _)| !aliases.contains_key(*name));
                write_safetensors(path, tensors, &metadata)
            }
            Sink::File(writer) if !same_path(writer.path(), path) => {
                Err(TraceError::Setup(format!(
                    "write({}): the recorder streams to {}; write there",
                    path.display(),
                    writer.path().display()
                )))
            }
            Sink::File(_) => {
                let Sink::File(writer) =
                    std::mem::replace(&mut *sink, Sink::Finished(path.to_path_buf()))
                else {
                    unreachable!("matched above")
                };
                writer.finish(metadata)
            }
            Sink::Finished(done) => Err(TraceError::Setup(format!(
                "write: the streamed trace was written to {} already",
                done.display()
            ))),
        }
    }
}

/// Whether `a` and `b` name the same file (as given, or once made absolute).
fn same_path(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::path::absolute(a), std::path::absolute(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

//! The thread that writes a streamed file's data, and the writeback it asks of the kernel.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

/// The thread that writes a file's data, one buffer at a time in the order given, while the
/// recording goes on: the copy into the page cache (at GPT-2 size a tenth of the recording's
/// time) overlaps the training loop's next tensors instead of adding to it. A hand-off waits for
/// the thread to take the buffer, so at most the tensor being written and the next one are out
/// beside the loop's memory. Each buffer written comes back on `written` for reuse.
#[derive(Debug)]
pub(super) struct Background {
    to_write: Option<SyncSender<Vec<u8>>>,
    pub(super) written: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<(BufWriter<File>, std::io::Result<()>)>>,
}

impl Background {
    pub(super) fn start(mut file: BufWriter<File>, start: u64) -> std::io::Result<Self> {
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
    pub(super) fn stopped(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Hand `bytes` to the thread; the error of an earlier write, if it failed.
    pub(super) fn write(&mut self, bytes: Vec<u8>) -> std::io::Result<()> {
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
    pub(super) fn stop(mut self) -> std::io::Result<BufWriter<File>> {
        self.to_write = None;
        let (file, result) = self.wait()?;
        result.map(|()| file)
    }

    pub(super) fn join(&mut self) -> std::io::Result<()> {
        self.to_write = None;
        self.wait()?.1
    }

    pub(super) fn wait(&mut self) -> std::io::Result<(BufWriter<File>, std::io::Result<()>)> {
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
pub(super) struct Writeback {
    /// The file's bytes handed to the kernel so far, and the end of those it was told to write out.
    written: u64,
    told: u64,
    refused: bool,
    every: u64,
}

impl Writeback {
    pub(super) fn new(start: u64) -> Self {
        Self::every(start, WRITEBACK_EVERY)
    }

    pub(super) fn every(start: u64, every: u64) -> Self {
        Self {
            written: start,
            told: 0,
            refused: false,
            every,
        }
    }

    /// `n` more bytes were handed to `file`; past a stretch, the kernel is told to write out those
    /// it has (not those still in the buffer). A refusal is not an error: the fsync writes them.
    pub(super) fn wrote(&mut self, file: &BufWriter<File>, n: u64) {
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

#[cfg(test)]
mod tests {
    use super::super::tests::scratch;
    use super::*;

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
}

//! The temporary file a trace is streamed to, beside its output, and the directory's sync.

use std::fs::File;
use std::path::{Path, PathBuf};

/// A new temporary file beside `path`: `.{file name}.{pid}.{random hex}.partial`.
pub(super) fn create_temp(path: &Path) -> std::io::Result<(PathBuf, File)> {
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
pub(super) fn sync_dir(path: &Path) {
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

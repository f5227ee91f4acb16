//! Training progress for `burnside`, which draws it as `running burn port: step k/N` on a terminal.

use std::ffi::OsStr;

/// The environment variable `burnside` sets when it runs a port and wants its progress.
pub(crate) const PROGRESS_ENV: &str = "BURNSIDE_PROGRESS";

/// Tell `burnside` that `done` of `total` training steps are done: call it with 0 before the
/// first step and after each step. It prints `burnside-progress: step {done}/{total}` on stderr
/// only when `BURNSIDE_PROGRESS` is set, so a port run by hand stays quiet.
pub fn step_done(done: usize, total: usize) {
    if let Some(line) = progress_line(std::env::var_os(PROGRESS_ENV).as_deref(), done, total) {
        eprintln!("{line}");
    }
}

fn progress_line(asked: Option<&OsStr>, done: usize, total: usize) -> Option<String> {
    asked.map(|_| format!("burnside-progress: step {done}/{total}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_only_when_asked() {
        assert_eq!(
            progress_line(Some(OsStr::new("1")), 2, 4).as_deref(),
            Some("burnside-progress: step 2/4")
        );
        assert_eq!(progress_line(None, 2, 4), None);
    }
}

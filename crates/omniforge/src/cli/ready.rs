//! `serve --ready-file FILE`: the machine-readable readiness signal.
//!
//! The contract: FILE does not exist until the server accepts connections; then it holds the
//! MCP endpoint's URL followed by one `\n` (`http://127.0.0.1:43125/mcp`), and it appears whole,
//! because it is written to a temporary file in the same directory and renamed into place. A
//! file left by an earlier run is removed at start, and the server removes its own at exit.
//! A watcher (inotify, or a loop in a shell script) waits for FILE to exist and reads it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A ready file not written yet.
#[derive(Debug)]
pub(super) struct ReadyFile {
    path: PathBuf,
}

impl ReadyFile {
    /// Removes what an earlier run left at `path`.
    ///
    /// # Errors
    /// `path` exists and cannot be removed.
    pub(super) fn clear(path: PathBuf) -> Result<ReadyFile> {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("removing the old ready file {}", path.display()));
            }
        }
        Ok(ReadyFile { path })
    }

    /// Writes `url` and a newline into place, atomically. The file is removed when the
    /// returned guard is dropped.
    ///
    /// # Errors
    /// The temporary file cannot be written or renamed.
    pub(super) fn announce(self, url: &str) -> Result<Announced> {
        write_atomically(&self.path, format!("{url}\n").as_bytes())
            .with_context(|| format!("writing the ready file {}", self.path.display()))?;
        Ok(Announced { path: self.path })
    }
}

/// A written ready file; removed on drop (the server has stopped accepting by then).
#[derive(Debug)]
pub(super) struct Announced {
    path: PathBuf,
}

impl Drop for Announced {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `bytes` to a temporary file next to `path`, then renames it to `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(name);
    let written =
        std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appears_whole_and_goes_at_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready");
        std::fs::write(&path, "stale\n").unwrap();
        let ready = ReadyFile::clear(path.clone()).unwrap();
        assert!(
            !path.exists(),
            "a stale ready file is removed before the server listens"
        );
        let announced = ready.announce("http://127.0.0.1:1/mcp").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "http://127.0.0.1:1/mcp\n"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file is left"
        );
        drop(announced);
        assert!(!path.exists());
    }
}

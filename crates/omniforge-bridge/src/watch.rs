//! Hot reload of manifest files.
//!
//! The watcher observes the file's directory (so that editors and generators that write a
//! new file and rename it over the old one are seen), waits for writes to settle, reloads,
//! and hands a valid manifest to the caller. A bad new manifest keeps the old one in place
//! and is logged with the reason.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::manifest::Manifest;

/// Why a file cannot be watched.
pub use notify::Error as WatchError;

/// How long the file must be quiet before it is reloaded.
const SETTLE: Duration = Duration::from_millis(150);

/// Keeps a watch alive; dropping it stops watching.
pub struct ManifestWatch {
    _watcher: RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ManifestWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `path` and calls `on_change` with each new valid manifest, from a tokio task.
/// Must be called inside a tokio runtime.
///
/// # Errors
/// The directory of `path` cannot be watched.
pub fn watch(
    path: &Path,
    mut on_change: impl FnMut(Manifest) + Send + 'static,
) -> Result<ManifestWatch, WatchError> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let dir = path
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("."));
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let file_name = path.file_name().map(|n| n.to_owned());
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        if event
            .paths
            .iter()
            .any(|p| p.file_name() == file_name.as_deref())
        {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    // Read the baseline now, not when the task first runs: a change that lands in between
    // must still count as a change.
    let mut last = Manifest::load(&path).ok();
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            // Let a burst of events (write, chmod, rename) settle into one reload.
            loop {
                match tokio::time::timeout(SETTLE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            match Manifest::load(&path) {
                Ok(manifest) if last.as_ref() == Some(&manifest) => {}
                Ok(manifest) => {
                    tracing::info!(path = %path.display(), tools = manifest.tools.len(), "manifest reloaded");
                    last = Some(manifest.clone());
                    on_change(manifest);
                }
                Err(error) => {
                    tracing::warn!(%error, "manifest changed but is not valid; keeping the previous one");
                }
            }
        }
    });
    Ok(ManifestWatch {
        _watcher: watcher,
        task,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(names: &[&str]) -> String {
        let tools: Vec<String> = names
            .iter()
            .map(|n| {
                format!(
                    r#"{{"name":"{n}","inputSchema":{{"type":"object"}},"procedure":"/p.S/{n}"}}"#
                )
            })
            .collect();
        format!(r#"{{"project":"p","tools":[{}]}}"#, tools.join(","))
    }

    #[tokio::test]
    async fn reloads_on_rename_and_keeps_old_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        std::fs::write(&path, manifest(&["a"])).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let _watch = watch(&path, move |m| {
            let _ = tx.send(m.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>());
        })
        .unwrap();

        let tmp = dir.path().join("manifest.json.tmp");
        std::fs::write(&tmp, manifest(&["a", "b"])).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, ["a", "b"]);

        std::fs::write(&path, "{broken").unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(800), rx.recv())
                .await
                .is_err()
        );

        std::fs::write(&path, manifest(&["c"])).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, ["c"]);
    }
}

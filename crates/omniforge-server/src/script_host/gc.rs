//! Removes environments no stored version uses any more: every hour, the first time ten
//! minutes after start.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use omniforge_store::Store;
use tokio_util::sync::CancellationToken;

use crate::script_host::host::ScriptHost;

/// Runs until `stop` fires or the host is dropped.
pub(crate) async fn collect_garbage(
    host: Weak<ScriptHost>,
    store: Arc<dyn Store>,
    stop: CancellationToken,
) {
    tokio::select! {
        () = stop.cancelled() => return,
        () = tokio::time::sleep(Duration::from_secs(600)) => {}
    }
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(host) = host.upgrade() else { return };
        match store.env_ids_in_use().await {
            Ok(in_use) => match retire_then_gc(&host, &in_use) {
                Ok(removed) if !removed.is_empty() => {
                    tracing::info!(removed = removed.len(), "removed unused environments")
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "removing unused environments failed"),
            },
            Err(error) => tracing::warn!(%error, "reading the environments in use failed"),
        }
    }
}

/// Retires the warm templates of every environment about to be removed, then removes them.
fn retire_then_gc(
    host: &ScriptHost,
    in_use: &HashSet<String>,
) -> Result<Vec<String>, omniforge_script::EnvError> {
    let layout = host.layout();
    if let Ok(entries) = std::fs::read_dir(layout.envs_dir()) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_str().is_none_or(|n| !in_use.contains(n)) {
                host.warm().retire_env(&entry.path());
            }
        }
    }
    omniforge_script::gc(&layout, in_use)
}

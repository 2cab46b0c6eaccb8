//! The lease loop every replica runs (see the module docs of `tasks`).

use std::sync::Arc;

use super::Tasks;

/// Until the server stops: every [`beat`](super::TaskSettings::beat), renews this replica's
/// leases, fails the tasks of replicas whose lease lapsed and of tasks past their TTL, and
/// purges expired finished tasks. A store error is logged and retried at the next beat.
pub(crate) async fn keep_leases(tasks: Arc<Tasks>) {
    let beat = tasks.settings.beat();
    loop {
        beat_once(&tasks).await;
        tokio::select! {
            () = tasks.stop.cancelled() => return,
            () = tokio::time::sleep(beat) => {}
        }
    }
}

/// One beat of [`keep_leases`].
pub(crate) async fn beat_once(tasks: &Tasks) {
    let store = &tasks.store;
    if let Err(e) = store
        .heartbeat_tasks(&tasks.replica, tasks.settings.lease)
        .await
    {
        tracing::warn!(error = %e, "renewing task leases");
    }
    match store.fail_lapsed_tasks().await {
        Ok(ids) if !ids.is_empty() => {
            tracing::info!(tasks = ?ids, "failed tasks whose replica stopped or whose TTL passed");
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "sweeping lapsed tasks"),
    }
    if let Err(e) = store.purge_expired_tasks().await {
        tracing::warn!(error = %e, "purging expired tasks");
    }
}

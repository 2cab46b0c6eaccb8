//! Audit retention (`--audit-retention`): with a retention set, the server prunes the audit
//! log's records older than it, once at start and then hourly, through
//! [`AuditLog::prune_audit`](omniforge_store::AuditLog::prune_audit). That prune takes turns
//! with the other replicas' (a PostgreSQL advisory lock; SQLite's write lock), never moves the
//! cut back, and writes an audit record of each prune that removed rows (the cut, the rows
//! removed), as the store's own principal. Without a retention nothing is pruned.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omniforge_store::{Actor, Store, StoreError};
use tokio_util::sync::CancellationToken;

/// How often a server with a retention prunes.
pub(crate) const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Prunes the records older than `keep`, now and every [`PRUNE_EVERY`], until `stop`.
pub(crate) async fn prune_audit_log(
    store: Arc<dyn Store>,
    keep: Duration,
    stop: CancellationToken,
) {
    // The first tick is at once: a server that starts prunes before its first hour.
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        match prune_once(&*store, keep).await {
            Ok(0) => tracing::debug!("audit retention: nothing to prune"),
            Ok(removed) => tracing::info!(removed, "audit retention: pruned old audit records"),
            Err(error) => tracing::warn!(%error, "audit retention: pruning the audit log failed"),
        }
    }
}

/// One prune: the records older than now minus `keep`; how many went.
///
/// # Errors
/// The store's.
pub(crate) async fn prune_once(store: &dyn Store, keep: Duration) -> Result<u64, StoreError> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let keep_ms = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
    store
        .prune_audit(&Actor::store(), now_ms.saturating_sub(keep_ms))
        .await
}

//! The change feed consumer: follows the store's change feed and applies each kind of change
//! to its side — tools to the catalog (one entry per changed tool), content to the content
//! snapshot. Secrets are read per call, so a secret change needs no reload.
//!
//! The store numbers every committed change; the consumer remembers the number it has applied,
//! asks what changed after it ([`ContentStore::changes_since`]), applies that, and waits for the
//! next change ([`ContentStore::wait_for_change`]: at once for a write through this process,
//! within [`POLL`] for another process's; a store with notifications, PostgreSQL `LISTEN`, wakes
//! it for every writer).

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{ChangeKind, ChangeSet, ContentStore, StoreError};
use tokio_util::sync::CancellationToken;

use crate::content::snapshot::Content;
use crate::tools::stored::source::StoredSource;

/// The longest the consumer waits before it asks the store again (another process's writes
/// cannot wake it on SQLite).
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The sides a change is applied to.
pub(crate) struct Sides {
    /// Stored tools in the catalog.
    pub(crate) tools: Arc<StoredSource>,
    /// Stored resources, templates and prompts.
    pub(crate) content: Arc<Content>,
}

impl Sides {
    /// Applies one set of changes, each kind to its side only.
    ///
    /// # Errors
    /// The store cannot be read; the caller asks again from the same number.
    pub(crate) async fn apply(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        if changes.reloads(ChangeKind::Tool) {
            self.tools.reload_all().await?;
        } else {
            for name in changes.keys(ChangeKind::Tool) {
                self.tools.reload(name).await?;
            }
        }
        let content = [
            ChangeKind::Resource,
            ChangeKind::ResourceTemplate,
            ChangeKind::Prompt,
        ];
        if content.into_iter().any(|kind| changes.touches(kind)) {
            self.content.reload().await?;
        }
        if changes.touches(ChangeKind::Secret) {
            tracing::debug!("secrets changed; runs read them per call, nothing to reload");
        }
        Ok(())
    }
}

/// Follows `store`'s changes after `seq` until `stop` fires.
pub(crate) async fn follow(
    store: Arc<dyn ContentStore>,
    mut seq: u64,
    sides: Sides,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = store.wait_for_change(seq, POLL) => {}
        }
        let changes = match store.changes_since(seq).await {
            Ok(changes) => changes,
            Err(error) => {
                tracing::warn!(%error, "reading the store's changes failed");
                sleep_or_stop(&stop).await;
                continue;
            }
        };
        if changes.is_empty() {
            seq = changes.seq;
            continue;
        }
        match sides.apply(&changes).await {
            Ok(()) => seq = changes.seq,
            Err(error) => {
                tracing::warn!(%error, "applying the store's changes failed");
                sleep_or_stop(&stop).await;
            }
        }
    }
}

/// After a failure: wait one poll interval before trying again (the store may be down).
async fn sleep_or_stop(stop: &CancellationToken) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(POLL) => {}
    }
}

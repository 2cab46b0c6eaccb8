//! The change feed consumer: follows the store's changes and applies each kind to its side —
//! tools to the catalog (one entry per changed tool), content to the content snapshot. Secrets
//! are read per call, so a secret change needs no reload.
//!
//! It asks the store what changed since the last counter it saw ([`ChangeFeed`]) whenever the
//! store may have changed: at once after a write through this process, else every second
//! (other processes' writes: the command line, another replica).

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{ContentStore, StoreError};
use tokio_util::sync::CancellationToken;

use crate::content::snapshot::Content;
use crate::tools::stored::source::StoredSource;

/// How long the consumer waits for a change before it asks again.
const POLL: Duration = Duration::from_secs(1);

/// What changed in the store after a counter.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    /// The counter now: give it to the next [`ChangeFeed::changes_since`].
    pub(crate) seq: i64,
    /// Which tools changed.
    pub(crate) tools: Changed,
    /// Whether resources, resource templates or prompts changed.
    pub(crate) content: bool,
    /// Whether secrets changed.
    pub(crate) secrets: bool,
}

/// Which things of one kind changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum Changed {
    /// None.
    #[default]
    Nothing,
    /// These, by name.
    #[allow(dead_code)]
    // until the store's keyed change feed is on main (`CounterFeed` cannot say)
    Keys(Vec<String>),
    /// Too many to say (or unknown): re-read them all.
    All,
}

/// The store side of the feed.
pub(crate) trait ChangeFeed: Send + Sync {
    /// The counter now; read it before loading everything, then follow from it.
    fn current_seq(&self) -> impl Future<Output = Result<i64, StoreError>> + Send;

    /// What changed after `seq`.
    fn changes_since(&self, seq: i64) -> impl Future<Output = Result<Changes, StoreError>> + Send;
}

/// The feed of a store that only keeps a change counter: when it moved, every kind may have
/// changed (the store does not say which).
pub(crate) struct CounterFeed(pub(crate) Arc<dyn ContentStore>);

impl ChangeFeed for CounterFeed {
    async fn current_seq(&self) -> Result<i64, StoreError> {
        self.0.data_version().await
    }

    async fn changes_since(&self, seq: i64) -> Result<Changes, StoreError> {
        let now = self.0.data_version().await?;
        if now == seq {
            return Ok(Changes {
                seq,
                ..Changes::default()
            });
        }
        Ok(Changes {
            seq: now,
            tools: Changed::All,
            content: true,
            secrets: true,
        })
    }
}

/// The sides a change is applied to.
pub(crate) struct Sides {
    /// Stored tools in the catalog.
    pub(crate) tools: Arc<StoredSource>,
    /// Stored resources, templates and prompts.
    pub(crate) content: Arc<Content>,
}

impl Sides {
    /// Applies one set of changes, each kind to its side.
    ///
    /// # Errors
    /// The store cannot be read; the caller asks again from the same counter.
    pub(crate) async fn apply(&self, changes: &Changes) -> Result<(), StoreError> {
        match &changes.tools {
            Changed::Nothing => {}
            Changed::Keys(names) => {
                for name in names {
                    self.tools.reload(name).await?;
                }
            }
            Changed::All => self.tools.reload_all().await?,
        }
        if changes.content {
            self.content.reload().await?;
        }
        if changes.secrets {
            tracing::debug!("secrets changed; runs read them per call, nothing to reload");
        }
        Ok(())
    }
}

/// Follows `feed` from `seq` until `stop` fires.
pub(crate) async fn follow(
    feed: impl ChangeFeed,
    mut seq: i64,
    sides: Sides,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let changes = match feed.changes_since(seq).await {
            Ok(changes) => changes,
            Err(error) => {
                tracing::warn!(%error, "reading the store's changes failed");
                continue;
            }
        };
        match sides.apply(&changes).await {
            Ok(()) => seq = changes.seq,
            Err(error) => tracing::warn!(%error, "applying the store's changes failed"),
        }
    }
}

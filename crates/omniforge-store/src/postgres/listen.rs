//! The change feed's wake-up on PostgreSQL: one `LISTEN` connection per store instance, opened
//! on the first [`ToolStore::wait_for_change`](crate::ToolStore::wait_for_change), that hears
//! the `NOTIFY` every committing writer sends (on any replica) and wakes this instance's
//! waiters.
//!
//! A notification is only a wake-up: readers read what changed by `seq`
//! ([`changes_since`](crate::ToolStore::changes_since)), so a lost notification can never lose
//! a change. When the `LISTEN` connection is lost (the server restarted, the backend was
//! terminated, the network broke), the task connects again, listens, and only then re-reads
//! the high-water mark and publishes it: whatever committed while nobody listened wakes the
//! waiters then, and whatever commits after is notified. Until it is back, waits end at their
//! `max_wait`, the polling interval, as on SQLite.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use tokio::sync::{OnceCell, watch};
use tokio::task::JoinHandle;

use crate::engine::exec::db;
use crate::error::StoreError;

/// The `NOTIFY` channel of change commits; the payload is the transaction's last change `seq`.
/// Channels are per database, so replicas of different databases on one cluster never meet.
pub(super) const CHANNEL: &str = "omniforge_changes";

/// The `application_name` of the `LISTEN` connection, so that an operator (or a test) can
/// find it in `pg_stat_activity`.
pub const LISTENER_APPLICATION_NAME: &str = "omniforge-listen";

/// First wait before connecting again after a failure; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// Longest wait between two attempts to connect the `LISTEN` connection.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The highest change `seq` this instance knows committed, and the task that listens.
#[derive(Debug)]
pub(super) struct Feed {
    /// Raised by this instance's commits and by notifications; set to the database's own
    /// high-water mark after each (re)connection of the `LISTEN` connection.
    newest: Arc<watch::Sender<u64>>,
    /// The listening task, started by the first wait; aborted by [`Feed::stop`] and on drop.
    listener: OnceCell<JoinHandle<()>>,
}

impl Feed {
    /// A feed that raises `newest`, which this instance's own commits raise too.
    pub(super) fn new(newest: Arc<watch::Sender<u64>>) -> Feed {
        Feed {
            newest,
            listener: OnceCell::new(),
        }
    }

    /// [`ToolStore::wait_for_change`](crate::ToolStore::wait_for_change): starts the listener
    /// if this is the first wait, then waits until a `seq` above `seq` is known, at most
    /// `max_wait`.
    pub(super) async fn wait(
        &self,
        pool: &PgPool,
        options: &PgConnectOptions,
        seq: u64,
        max_wait: Duration,
    ) {
        self.listener
            .get_or_init(|| {
                std::future::ready(tokio::spawn(listen(
                    pool.clone(),
                    options.clone(),
                    self.newest.clone(),
                )))
            })
            .await;
        let mut newest = self.newest.subscribe();
        // `Err` only if the sender is gone, which `&self` rules out; a timeout is the poll.
        let _ = tokio::time::timeout(max_wait, newest.wait_for(|&n| n > seq)).await;
    }

    /// Stops listening (the store is closing).
    pub(super) fn stop(&self) {
        if let Some(task) = self.listener.get() {
            task.abort();
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Raises `newest` to `seq` if that is higher, waking the waiters it concerns.
fn raise(newest: &watch::Sender<u64>, seq: u64) {
    newest.send_if_modified(|n| {
        let higher = seq > *n;
        if higher {
            *n = seq;
        }
        higher
    });
}

/// The listening task: connects, listens, re-reads, relays notifications; on any loss, again,
/// with a growing pause while connecting fails.
async fn listen(pool: PgPool, options: PgConnectOptions, newest: Arc<watch::Sender<u64>>) {
    // A pool of one connection, never recycled: `PgListener` takes its connection from a pool.
    let listen_pool = PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_lazy_with(options.application_name(LISTENER_APPLICATION_NAME));
    let mut backoff = FIRST_BACKOFF;
    loop {
        match listen_once(&listen_pool, &pool, &newest, &mut backoff).await {
            Ok(()) => {
                tracing::warn!("change feed: LISTEN connection lost; listening again");
                // Never a busy loop, even if a new connection fails at once every time.
                tokio::time::sleep(FIRST_BACKOFF).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "change feed: cannot LISTEN");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One life of the `LISTEN` connection: `Ok` when it was lost after listening, `Err` when it
/// could not be set up.
async fn listen_once(
    listen_pool: &PgPool,
    pool: &PgPool,
    newest: &watch::Sender<u64>,
    backoff: &mut Duration,
) -> Result<(), StoreError> {
    let mut listener = PgListener::connect_with(listen_pool).await.map_err(db)?;
    // A lost connection ends this life (and the loop re-reads); no silent reconnection.
    listener.eager_reconnect(false);
    listener.ignore_pool_close_event(true);
    listener.listen(CHANNEL).await.map_err(db)?;
    // Listening: every commit from now on is notified. What committed before, while nobody
    // listened, is read back by seq. Set, not raised: a database restored to an older state
    // lowers the mark, so waiters are not woken forever by a seq it no longer has.
    let seq: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'data_version'")
        .fetch_one(pool)
        .await
        .map_err(db)?;
    let seq = u64::try_from(seq).unwrap_or(0);
    newest.send_if_modified(|n| {
        let differs = *n != seq;
        *n = seq;
        differs
    });
    *backoff = FIRST_BACKOFF;
    loop {
        match listener.try_recv().await {
            Ok(Some(notification)) => match notification.payload().parse::<u64>() {
                Ok(seq) => raise(newest, seq),
                Err(_) => tracing::warn!(
                    payload = notification.payload(),
                    "change feed: odd notification"
                ),
            },
            Ok(None) => return Ok(()),
            // The connection broke in a way `PgListener` reports as an error (a terminated
            // backend sends an error before closing): treat it as lost.
            Err(e) => {
                tracing::debug!(error = %e, "change feed: LISTEN connection failed");
                return Ok(());
            }
        }
    }
}

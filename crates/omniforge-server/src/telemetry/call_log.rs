//! [`CallLogWriter`]: the call log off the answers' path. Every finished call of every source
//! (built-in, manifest, stored; inline or as a task) hands its row to a bounded queue and
//! goes on; one writer task commits the queued rows in batches, one transaction each
//! ([`Store::record_calls`](omniforge_store::CallLog::record_calls): the rows, their hour
//! counters, the log's pruning), on SQLite and PostgreSQL alike (group commit). A batch starts
//! with the first row queued after the last commit and is committed when its first row has
//! waited [`CallLogSettings::batch_wait`] (20 ms by default; the rows fill the queue meanwhile),
//! at once when [`MAX_BATCH_ROWS`] rows are waiting or a flush asks, so a server under load
//! makes one commit (one sync) per few hundred calls instead of one per call, and a quiet one
//! writes each call within ~20 ms.
//!
//! # Durability
//! The call log is the one write nobody waits for. A graceful shutdown (SIGTERM/SIGINT, or EOF
//! on stdio) answers the calls in flight, then [`flush`](CallLogWriter::flush)es the queue:
//! every call answered before it is in the log. `kill -9` (or a power loss) loses the rows not
//! yet committed: the open batch (the calls of the last `batch_wait`, at most
//! [`MAX_BATCH_ROWS`] rows), plus, only while the writer falls behind, the rows queued after it.
//! Acknowledged writes (tools, versions, secrets, grants, tasks, content) keep their guarantee:
//! they are committed and synced before their answer.
//!
//! # When the writer falls behind
//! The queue holds at most `--call-log-queue` rows. When it is full, the row is dropped, never
//! the call: the call's answer is not delayed, `omniforge_call_log_dropped_total{reason=
//! "queue_full"}` counts the row, and a warning is logged, at most one per [`WARN_EVERY`]
//! (with the rows dropped since the last one). A batch the store refuses as a whole (a database
//! error) is counted as `reason="write_failed"`. Because rows may be dropped, nothing that
//! enforces a limit may count from the call log; the hour counters and the log are for reading
//! (the console's charts, `omniforge tool calls`, `recentCalls`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use omniforge_store::{CallRecord, Store};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc, oneshot};

use super::metrics::{CallLogLoss, Metrics};

/// The default of `--call-log-queue`: rows waiting for the writer at most.
pub const DEFAULT_QUEUE_ROWS: usize = 4096;

/// The default of `--call-log-batch-wait`.
pub const DEFAULT_BATCH_WAIT: Duration = Duration::from_millis(20);

/// Most rows one batch (one transaction) holds.
pub(crate) const MAX_BATCH_ROWS: usize = 256;

/// Shortest time between two warnings about dropped rows.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How the call log is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLogSettings {
    /// Most rows waiting to be written (`--call-log-queue`, at least 1; default
    /// [`DEFAULT_QUEUE_ROWS`]): past it, rows are dropped (counted in
    /// `omniforge_call_log_dropped_total`), never calls.
    pub queue_rows: usize,
    /// How long a batch's first row waits for others before the batch is committed
    /// (`--call-log-batch-wait`; default [`DEFAULT_BATCH_WAIT`]): what `kill -9` may lose.
    pub batch_wait: Duration,
}

impl Default for CallLogSettings {
    fn default() -> Self {
        CallLogSettings {
            queue_rows: DEFAULT_QUEUE_ROWS,
            batch_wait: DEFAULT_BATCH_WAIT,
        }
    }
}

/// What the queue carries.
// Nearly every item is a row: kept inline in the queue's slots, as boxing it would cost an
// allocation per call.
#[allow(clippy::large_enum_variant)]
enum Item {
    /// A finished call's row.
    Call(CallRecord),
    /// Answered once every row queued before it is committed (or failed).
    Flush(oneshot::Sender<()>),
}

/// The queue's sending side: cheap to share, never waits (see the module doc).
pub(crate) struct CallLogWriter {
    /// Bounded: its capacity is `--call-log-queue`. The open batch waits in it.
    queue: mpsc::Sender<Item>,
    /// Wakes the writer from its batch wait when a flush was queued.
    flushing: Arc<Notify>,
    /// Shared with the writer task, which counts the rows of failed batches.
    losses: Arc<Losses>,
}

/// Counts and reports lost rows.
struct Losses {
    metrics: Arc<Metrics>,
    /// When the last warning was logged, and the rows dropped since.
    warned: Mutex<(Option<Instant>, u64)>,
}

impl Losses {
    /// Counts `rows` lost for `reason`; logs a warning unless one was logged less than
    /// [`WARN_EVERY`] ago (the next one then tells how many were lost in between).
    fn lost(&self, reason: CallLogLoss, rows: u64) {
        self.metrics.call_log_dropped(reason, rows);
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        warned.1 += rows;
        let now = Instant::now();
        if warned
            .0
            .is_none_or(|at| now.duration_since(at) >= WARN_EVERY)
        {
            tracing::warn!(
                rows = warned.1,
                reason = reason.label(),
                "call log rows dropped (the calls themselves were answered); see \
                 omniforge_call_log_dropped_total, and --call-log-queue"
            );
            *warned = (Some(now), 0);
        }
    }
}

impl CallLogWriter {
    /// A queue and its writer task, which writes to `store` and ends once every
    /// [`CallLogWriter`] is dropped and the queue is written. Must be called inside a tokio
    /// runtime.
    pub(crate) fn start(
        store: Arc<dyn Store>,
        settings: CallLogSettings,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (queue, rows) = mpsc::channel(settings.queue_rows.max(1));
        let losses = Arc::new(Losses {
            metrics,
            warned: Mutex::new((None, 0)),
        });
        let flushing = Arc::new(Notify::new());
        tokio::spawn(write(
            store,
            rows,
            settings.batch_wait,
            flushing.clone(),
            losses.clone(),
        ));
        CallLogWriter {
            queue,
            flushing,
            losses,
        }
    }

    /// Queues `call`'s row; drops it (counted, see the module doc) when the queue is full.
    /// Never waits.
    pub(crate) fn record(&self, call: CallRecord) {
        match self.queue.try_send(Item::Call(call)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.losses.lost(CallLogLoss::QueueFull, 1),
            // Only if the writer task is gone (its runtime is shutting down).
            Err(TrySendError::Closed(_)) => self.losses.lost(CallLogLoss::WriteFailed, 1),
        }
    }

    /// Waits until every row queued before this call is committed (or its batch failed): the
    /// last step of a graceful shutdown. Waits for room in a full queue.
    pub(crate) async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        // Woken first: the open batch may be what fills the queue.
        self.flushing.notify_one();
        if self.queue.send(Item::Flush(done)).await.is_ok() {
            self.flushing.notify_one();
            let _ = flushed.await;
        }
    }
}

/// The writer task, until the queue is closed and empty: takes a batch's first row, lets the
/// batch gather in the queue for `wait` (less when [`MAX_BATCH_ROWS`] rows are there already,
/// or a flush wakes it), takes at most [`MAX_BATCH_ROWS`] rows (up to a flush's marker), and
/// commits them in one transaction.
async fn write(
    store: Arc<dyn Store>,
    mut queue: mpsc::Receiver<Item>,
    wait: Duration,
    flushing: Arc<Notify>,
    losses: Arc<Losses>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH_ROWS);
    let mut flushes = Vec::new();
    while let Some(first) = queue.recv().await {
        take(first, &mut batch, &mut flushes);
        if flushes.is_empty() && queue.len() + 1 < MAX_BATCH_ROWS {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = flushing.notified() => {}
            }
        }
        while batch.len() < MAX_BATCH_ROWS && flushes.is_empty() {
            let Ok(item) = queue.try_recv() else { break };
            take(item, &mut batch, &mut flushes);
        }
        if !batch.is_empty() {
            let calls = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH_ROWS));
            let rows = calls.len() as u64;
            match store.record_calls(calls).await {
                Ok(refused) => {
                    for error in refused {
                        tracing::warn!(%error, "a call could not be logged");
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, rows, "writing a batch of the call log failed");
                    losses.lost(CallLogLoss::WriteFailed, rows);
                }
            }
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Puts a queued item in the batch, or a flush's answer with the flushes.
fn take(item: Item, batch: &mut Vec<CallRecord>, flushes: &mut Vec<oneshot::Sender<()>>) {
    match item {
        Item::Call(call) => batch.push(call),
        Item::Flush(done) => flushes.push(done),
    }
}

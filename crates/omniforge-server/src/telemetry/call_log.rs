//! [`CallLogWriter`]: the call log off the answers' path. Every finished call of every source
//! (built-in, manifest, stored; inline or as a task) hands its row to a bounded queue and
//! goes on; one writer task takes the rows out and commits them in batches, one transaction
//! each ([`Store::record_calls`](omniforge_store::CallLog::record_calls): the rows, their hour
//! counters, the log's pruning), on SQLite and PostgreSQL alike. A batch is committed when it
//! holds [`MAX_BATCH_ROWS`] rows or when its first row has waited [`MAX_BATCH_WAIT`], whichever
//! comes first, so a server under load makes one commit (one sync) per few hundred calls
//! instead of one per call, and a quiet one writes each call within ~20 ms.
//!
//! # Durability
//! The call log is the one write nobody waits for. A graceful shutdown (SIGTERM/SIGINT, or EOF
//! on stdio) answers the calls in flight, then [`flush`](CallLogWriter::flush)es the queue:
//! every call answered before it is in the log. `kill -9` (or a power loss) loses the rows not
//! yet committed: the open batch (at most [`MAX_BATCH_WAIT`] of calls, at most
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
use tokio::sync::{mpsc, oneshot};

use super::metrics::{CallLogLoss, Metrics};

/// The default of `--call-log-queue`: rows waiting for the writer at most.
pub const DEFAULT_QUEUE_ROWS: usize = 4096;

/// Most rows one batch (one transaction) holds.
pub(crate) const MAX_BATCH_ROWS: usize = 256;

/// Longest the first row of a batch waits for more before the batch is committed.
pub(crate) const MAX_BATCH_WAIT: Duration = Duration::from_millis(20);

/// Shortest time between two warnings about dropped rows.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What the queue carries.
enum Item {
    /// A finished call's row.
    Call(CallRecord),
    /// Answered once every row queued before it is committed (or failed).
    Flush(oneshot::Sender<()>),
}

/// The queue's sending side: cheap to share, never waits (see the module doc).
pub(crate) struct CallLogWriter {
    /// Bounded: its capacity is `--call-log-queue`.
    queue: mpsc::Sender<Item>,
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
    /// A queue of `capacity` rows (at least 1) and its writer task, which writes to `store`
    /// and ends once every [`CallLogWriter`] is dropped and the queue is written. Must be
    /// called inside a tokio runtime.
    pub(crate) fn start(store: Arc<dyn Store>, capacity: usize, metrics: Arc<Metrics>) -> Self {
        let (queue, rows) = mpsc::channel(capacity.max(1));
        let losses = Arc::new(Losses {
            metrics,
            warned: Mutex::new((None, 0)),
        });
        tokio::spawn(write(store, rows, losses.clone()));
        CallLogWriter { queue, losses }
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
        if self.queue.send(Item::Flush(done)).await.is_ok() {
            let _ = flushed.await;
        }
    }
}

/// The writer task: batches of at most [`MAX_BATCH_ROWS`] rows, each committed
/// [`MAX_BATCH_WAIT`] after its first row at the latest (at once when a flush asks), until the
/// queue is closed and empty.
async fn write(store: Arc<dyn Store>, mut queue: mpsc::Receiver<Item>, losses: Arc<Losses>) {
    let mut items = Vec::with_capacity(MAX_BATCH_ROWS);
    let mut batch = Vec::with_capacity(MAX_BATCH_ROWS);
    let mut flushes = Vec::new();
    loop {
        if queue.recv_many(&mut items, MAX_BATCH_ROWS).await == 0 {
            return; // closed and empty
        }
        let deadline = tokio::time::Instant::now() + MAX_BATCH_WAIT;
        loop {
            for item in items.drain(..) {
                match item {
                    Item::Call(call) => batch.push(call),
                    Item::Flush(done) => flushes.push(done),
                }
            }
            if batch.len() >= MAX_BATCH_ROWS || !flushes.is_empty() {
                break;
            }
            let room = MAX_BATCH_ROWS - batch.len();
            match tokio::time::timeout_at(deadline, queue.recv_many(&mut items, room)).await {
                Ok(0) | Err(_) => break, // closed, or the batch's time is up
                Ok(_) => {}
            }
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

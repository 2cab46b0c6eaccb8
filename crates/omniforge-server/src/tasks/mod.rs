//! Durable tasks (issue 13; MCP Tasks extension, SEP-2663): a call that runs apart from the
//! request that started it, its state in the store so that it outlives the client's
//! connection and session and any replica answers for it.
//!
//! - `runner.rs`: [`Tasks::start`] creates the task in the store (before anything is
//!   answered) and drives the call on this replica: it writes the call's end, and stops the
//!   call (its cancellation token, which kills a script's process tree) as soon as the store
//!   says the task ended elsewhere (`tasks/cancel` on any replica, a TTL or lease sweep),
//!   which it hears through the change feed.
//! - `lease.rs`: the loop every replica runs: it renews the leases of its own tasks, fails
//!   any replica's tasks whose lease lapsed or whose TTL passed, and purges expired ones.
//!
//! **Lease period.** A replica renews its leases every [`TaskSettings::lease`] / 3, and every
//! replica sweeps as often. A replica that dies (crash, `kill -9`, lost machine) stops
//! renewing; its unfinished tasks read `failed`, with a message saying their replica stopped,
//! at most `lease + lease / 3` after its last renewal (40 s with the default 30 s lease), as
//! soon as any replica of the store runs (a restarted server does it itself). A replica that
//! shuts down in order fails its unfinished tasks itself at once.

mod lease;
mod runner;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::Store;
use tokio_util::sync::CancellationToken;

pub(crate) use lease::keep_leases;
pub(crate) use runner::TaskCall;

/// The default [`TaskSettings::ttl`]: a day.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(24 * 3600);

/// The default [`TaskSettings::poll_interval`].
pub const DEFAULT_TASK_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The default [`TaskSettings::lease`].
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(30);

/// How this server's tasks are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSettings {
    /// How long a task is kept from its creation (`ttlMs`); never shorter than the call's
    /// timeout. A task still running at its TTL is stopped and marked failed; a finished one
    /// is readable until then and purged after.
    pub ttl: Duration,
    /// How often clients are told to poll (`pollIntervalMs`).
    pub poll_interval: Duration,
    /// How long a task's lease holds without renewal (see the module docs).
    pub lease: Duration,
}

impl Default for TaskSettings {
    fn default() -> TaskSettings {
        TaskSettings {
            ttl: DEFAULT_TASK_TTL,
            poll_interval: DEFAULT_TASK_POLL_INTERVAL,
            lease: DEFAULT_TASK_LEASE,
        }
    }
}

impl TaskSettings {
    /// How often leases are renewed and swept: a third of the lease, at least 10 ms.
    pub(crate) fn beat(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(10))
    }
}

/// This replica's tasks: the store, the replica's id and the settings.
pub(crate) struct Tasks {
    store: Arc<dyn Store>,
    /// This process's replica id: random per process, so that two servers on one store (or
    /// a restarted one) never take each other's tasks for their own.
    replica: String,
    settings: TaskSettings,
    /// Fires when the server stops.
    stop: CancellationToken,
}

impl Tasks {
    /// Tasks of a new replica on `store`.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        settings: TaskSettings,
        stop: CancellationToken,
    ) -> Arc<Tasks> {
        Arc::new(Tasks {
            store,
            replica: format!("replica-{}", uuid::Uuid::new_v4().simple()),
            settings,
            stop,
        })
    }

    /// The store the tasks live in.
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// This replica's id.
    #[cfg(test)]
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }
}

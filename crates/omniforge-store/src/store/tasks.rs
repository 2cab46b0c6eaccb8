//! [`TaskStore`]: durable tasks (issue 13), readable by their owner only, run by the replica
//! that holds their lease.

use std::time::Duration;

use async_trait::async_trait;

use super::tools::ToolStore;
use crate::error::StoreError;
use crate::model::{JsonObject, NewTask, StoredTask, TaskEnd, TaskStatus};

/// Durable tasks: in the database, so that a task outlives its client's connection and
/// session, every replica answers `tasks/get`, and `tasks/update`/`tasks/cancel` reach the
/// replica that runs it through the change feed (each change of status or pending input is a
/// change of kind [`Task`](crate::ChangeKind::Task), key the task id).
///
/// **Leases.** The replica that creates a task holds its lease until
/// [`lease_expires_at_ms`](StoredTask::lease_expires_at_ms) and renews it with
/// [`heartbeat_tasks`](TaskStore::heartbeat_tasks). Any replica's
/// [`fail_lapsed_tasks`](TaskStore::fail_lapsed_tasks) fails an unfinished task whose lease
/// lapsed (its replica died) or whose TTL passed, with a message saying so. A task never stays `working` longer
/// than its lease after its replica stopped.
///
/// **Terminal is final.** A completed, failed or cancelled task never changes again: a late
/// write of its replica (after a cancel or a sweep) is refused with `false`.
///
/// Tasks are not actions (no audit records); the call log records the call itself.
#[async_trait]
pub trait TaskStore: ToolStore {
    /// Creates a `working` task leased by `task.replica`; it is readable by any replica when
    /// this returns.
    ///
    /// # Errors
    /// [`StoreError::InvalidName`] for a bad task id; [`StoreError::Invalid`] (see the fields
    /// of [`NewTask`]); [`StoreError::Duplicate`] (kind [`Task`](crate::NameKind::Task)) if
    /// the id is taken; [`StoreError::Database`].
    async fn create_task(&self, task: NewTask) -> Result<StoredTask, StoreError>;

    /// The task `task_id` if `owner` created it. Another principal's task, like an unknown
    /// id, is `None`: the answer never tells that it exists.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn task(&self, task_id: &str, owner: &str) -> Result<Option<StoredTask>, StoreError>;

    /// The task `task_id` whoever owns it: for the replica that runs it (never for answering
    /// a client).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn task_for_replica(&self, task_id: &str) -> Result<Option<StoredTask>, StoreError>;

    /// Renews, until now plus `lease`, the lease of every unfinished task `replica` holds
    /// whose lease has not lapsed yet (a lapsed lease is never revived: another replica may
    /// be failing the task). Returns how many. Not a change of the feed.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn heartbeat_tasks(&self, replica: &str, lease: Duration) -> Result<u64, StoreError>;

    /// Sets an unfinished task of `replica` to `input_required` with `requests` (`{key:
    /// {method, params}}`, replacing any pending ones). Returns false, writing nothing, if the
    /// task is unknown, terminal or another replica's.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for no requests; [`StoreError::Database`].
    async fn require_task_input(
        &self,
        task_id: &str,
        replica: &str,
        requests: JsonObject,
        status_message: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Delivers `responses` (`tasks/update`'s `inputResponses`) to `owner`'s task: each answer
    /// to a pending request leaves [`input_requests`](StoredTask::input_requests) and waits in
    /// [`input_responses`](StoredTask::input_responses) for the replica; when none is pending
    /// the task is `working` again. Answers to keys it did not ask, and any answer to a task
    /// that waits for none, are ignored. Returns the accepted keys.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (kind [`Task`](crate::NameKind::Task)) for an unknown id or
    /// another principal's task; [`StoreError::Database`].
    async fn update_task(
        &self,
        task_id: &str,
        owner: &str,
        responses: JsonObject,
    ) -> Result<Vec<String>, StoreError>;

    /// Takes (returns and clears) the answers waiting for `replica`'s task. Empty for an
    /// unknown, terminal or another replica's task.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn take_task_responses(
        &self,
        task_id: &str,
        replica: &str,
    ) -> Result<JsonObject, StoreError>;

    /// Ends an unfinished task of `replica`: `completed` with the call's result or `failed`
    /// with an error object. Returns false, writing nothing, if it ended already (e.g.
    /// cancelled), is unknown or another replica's.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for an error without an integer `code` and a string `message`;
    /// [`StoreError::Database`].
    async fn finish_task(
        &self,
        task_id: &str,
        replica: &str,
        end: TaskEnd,
        status_message: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Cancels `owner`'s task: an unfinished one becomes `cancelled` at once (its replica
    /// hears the change and stops the process); a terminal one is left as it is. Returns the
    /// task as it is afterwards.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (kind [`Task`](crate::NameKind::Task)) for an unknown id or
    /// another principal's task; [`StoreError::Database`].
    async fn cancel_task(&self, task_id: &str, owner: &str) -> Result<StoredTask, StoreError>;

    /// Fails every unfinished task whose TTL passed or whose lease lapsed, with a message
    /// saying which; returns their ids. Any replica may call it periodically.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn fail_lapsed_tasks(&self) -> Result<Vec<String>, StoreError>;

    /// Deletes every terminal task past its TTL; returns how many.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn purge_expired_tasks(&self) -> Result<u64, StoreError>;

    /// How many tasks the store holds in each status, every principal's and every
    /// replica's (for the metrics); statuses without tasks are left out.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for an unknown status; [`StoreError::Database`].
    async fn count_tasks(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError>;
}

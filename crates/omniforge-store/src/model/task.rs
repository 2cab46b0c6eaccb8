//! Durable tasks (issue 13; MCP Tasks extension, SEP-2663): a tool call that the client polls
//! instead of waiting for, stored so that it outlives the client's connection and its session
//! and can be read through any replica.

use std::time::Duration;

use super::JsonObject;
use super::call::CallSource;
use crate::error::StoreError;

/// The status of a task, as the Tasks extension spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for answers to its [`input_requests`](StoredTask::input_requests), delivered
    /// by [`update_task`](crate::TaskStore::update_task).
    InputRequired,
    /// Finished with a tool result (also a result with `isError`).
    Completed,
    /// Could not finish: a crash, a lost replica, its TTL, a protocol error.
    Failed,
    /// Cancelled by its owner.
    Cancelled,
}

impl TaskStatus {
    /// Every status, in a fixed order.
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    /// The wire and stored spelling: `working`, `input_required`, `completed`, `failed`,
    /// `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// The status a spelling names, if any.
    pub fn parse(s: &str) -> Option<TaskStatus> {
        TaskStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the task has ended: completed, failed or cancelled. A terminal task never
    /// changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// The longest task id, in bytes.
pub const MAX_TASK_ID_LEN: usize = 128;

/// The longest replica id, in bytes.
pub const MAX_REPLICA_ID_LEN: usize = 256;

/// The longest status message kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_TASK_MESSAGE_BYTES: usize = 4096;

/// A task to create: it starts `working`, leased by `replica` for `lease`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// Its id (the `taskId` clients see): 1 to [`MAX_TASK_ID_LEN`] characters from
    /// `[a-zA-Z0-9_.:-]`; the server makes it unguessable.
    pub task_id: String,
    /// The principal that created it: the only one that may read, update or cancel it.
    pub owner: String,
    /// Which kind of tool it runs: [`CallSource::Stored`] or [`CallSource::Manifest`].
    pub source: CallSource,
    /// The tool's name.
    pub tool: String,
    /// The stored tool's version (set exactly for [`CallSource::Stored`]).
    pub version: Option<u32>,
    /// The replica that runs it.
    pub replica: String,
    /// How long the task is kept from its creation (`ttlMs`); `None`: until purged by hand.
    pub ttl: Option<Duration>,
    /// How often clients should poll (`pollIntervalMs`), at least 1 ms.
    pub poll_interval: Duration,
    /// How long the lease holds without a [`heartbeat`](crate::TaskStore::heartbeat_tasks).
    pub lease: Duration,
}

/// How a task ended, written by its replica.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEnd {
    /// A tool result (the `CallToolResult` an inline call gives, `isError` included).
    Completed(JsonObject),
    /// The task could not finish: `{code, message, data?}` (a JSON-RPC error object).
    Failed(JsonObject),
}

/// A stored task.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTask {
    /// Its id.
    pub task_id: String,
    /// The principal that created it.
    pub owner: String,
    /// Which kind of tool it runs.
    pub source: CallSource,
    /// The tool's name.
    pub tool: String,
    /// The stored tool's version.
    pub version: Option<u32>,
    /// Its status.
    pub status: TaskStatus,
    /// A human-readable note on the status (why it failed, what it waits for).
    pub status_message: Option<String>,
    /// When it was created, unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// When its status or pending input last changed, unix milliseconds (UTC).
    pub updated_at_ms: i64,
    /// Its TTL in milliseconds (`ttlMs`), if any.
    pub ttl_ms: Option<i64>,
    /// When it may be purged: `created_at_ms + ttl_ms`.
    pub expires_at_ms: Option<i64>,
    /// The poll interval in milliseconds (`pollIntervalMs`).
    pub poll_interval_ms: i64,
    /// The tool result of a [`Completed`](TaskStatus::Completed) task.
    pub result: Option<JsonObject>,
    /// The error of a [`Failed`](TaskStatus::Failed) task.
    pub error: Option<JsonObject>,
    /// The pending input requests of an [`InputRequired`](TaskStatus::InputRequired) task.
    pub input_requests: Option<JsonObject>,
    /// Answers delivered and not yet taken by the running replica.
    pub input_responses: JsonObject,
    /// The replica that holds its lease.
    pub replica: String,
    /// When the lease lapses unless renewed, unix milliseconds (UTC).
    pub lease_expires_at_ms: i64,
}

/// Checks a task id: 1 to [`MAX_TASK_ID_LEN`] characters from `[a-zA-Z0-9_.:-]`.
///
/// # Errors
/// [`StoreError::InvalidName`] with [`NameKind::Task`](crate::NameKind::Task).
pub fn validate_task_id(task_id: &str) -> Result<(), StoreError> {
    let ok = (1..=MAX_TASK_ID_LEN).contains(&task_id.len())
        && task_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind: crate::error::NameKind::Task,
            name: task_id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_terminal_ones_are_the_last_three() {
        for s in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(TaskStatus::parse("done"), None);
        let terminal: Vec<_> = TaskStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                TaskStatus::Completed,
                TaskStatus::Failed,
                TaskStatus::Cancelled
            ]
        );
    }

    #[test]
    fn task_ids_follow_their_rule() {
        assert!(validate_task_id("tsk_AZaz09.:-").is_ok());
        for bad in ["", "a b", "a/b", &"x".repeat(MAX_TASK_ID_LEN + 1)] {
            assert!(validate_task_id(bad).is_err(), "{bad:?}");
        }
    }
}

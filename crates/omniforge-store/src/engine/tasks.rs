//! Durable tasks: the `task` table. Every change of a task's status or pending input is a
//! change of the feed (kind `task`, key the task id) written under the feed's lock, so that
//! read-modify-writes of one task never interleave and the replica running it hears
//! `tasks/cancel` and `tasks/update` at once; lease renewals are not changes.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::exec::{Conn, Row, q};
use super::rows::{corrupt, get_json, not_found, now_ms, opt_json, opt_u32, to_json, to_opt_json};
use super::{Engine, Lock, Write};
use crate::error::{NameKind, StoreError};
use crate::model::{
    CallSource, ChangeKind, JsonObject, MAX_TASK_MESSAGE_BYTES, NewTask, StoredTask, TaskEnd,
    TaskStatus,
};
use crate::store::TaskStore;
use crate::validate::{check_task, cut};

/// The JSON-RPC code of the error a task fails with when the store fails it (internal error).
const STORE_FAILURE_CODE: i64 = -32603;

/// The columns [`task_from_row`] reads.
macro_rules! task_columns {
    () => {
        "task_id, owner, source, tool, version, status, status_message, created_at_ms, \
         updated_at_ms, ttl_ms, expires_at_ms, poll_interval_ms, result, error, input_requests, \
         input_responses, replica, lease_expires_at_ms"
    };
}
pub(super) use task_columns;

/// A `task` row.
pub(super) fn task_from_row(row: &mut Row) -> Result<StoredTask, StoreError> {
    let source: String = row.get("source")?;
    let status: String = row.get("status")?;
    Ok(StoredTask {
        task_id: row.get("task_id")?,
        owner: row.get("owner")?,
        source: CallSource::parse(&source)
            .ok_or_else(|| corrupt(format!("unknown task source {source:?}")))?,
        tool: row.get("tool")?,
        version: opt_u32(row, "version")?,
        status: TaskStatus::parse(&status)
            .ok_or_else(|| corrupt(format!("unknown task status {status:?}")))?,
        status_message: row.get("status_message")?,
        created_at_ms: row.get("created_at_ms")?,
        updated_at_ms: row.get("updated_at_ms")?,
        ttl_ms: row.get("ttl_ms")?,
        expires_at_ms: row.get("expires_at_ms")?,
        poll_interval_ms: row.get("poll_interval_ms")?,
        result: opt_json(row, "result")?,
        error: opt_json(row, "error")?,
        input_requests: opt_json(row, "input_requests")?,
        input_responses: get_json(row, "input_responses")?,
        replica: row.get("replica")?,
        lease_expires_at_ms: row.get("lease_expires_at_ms")?,
    })
}

/// Inserts a task row as it is (a new task, or a copied one); returns whether it did (false:
/// the id is taken).
pub(super) async fn insert_task(conn: &mut dyn Conn, t: &StoredTask) -> Result<bool, StoreError> {
    let done = q(concat!(
        "INSERT INTO task (",
        task_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
         $18) ON CONFLICT (task_id) DO NOTHING"
    ))
    .bind(&t.task_id)
    .bind(&t.owner)
    .bind(t.source.as_str())
    .bind(&t.tool)
    .bind(t.version)
    .bind(t.status.as_str())
    .bind(t.status_message.as_deref())
    .bind(t.created_at_ms)
    .bind(t.updated_at_ms)
    .bind(t.ttl_ms)
    .bind(t.expires_at_ms)
    .bind(t.poll_interval_ms)
    .bind(to_opt_json("result", t.result.as_ref())?)
    .bind(to_opt_json("error", t.error.as_ref())?)
    .bind(to_opt_json("input_requests", t.input_requests.as_ref())?)
    .bind(to_json("input_responses", &t.input_responses)?)
    .bind(&t.replica)
    .bind(t.lease_expires_at_ms)
    .execute(conn)
    .await?;
    Ok(done > 0)
}

/// Milliseconds of a duration, saturating.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// One task by id, read in `conn`, whoever owns it.
async fn fetch(conn: &mut dyn Conn, task_id: &str) -> Result<Option<StoredTask>, StoreError> {
    let row = q(concat!(
        "SELECT ",
        task_columns!(),
        " FROM task WHERE task_id = $1"
    ))
    .bind(task_id)
    .fetch_optional(conn)
    .await?;
    row.map(|mut row| task_from_row(&mut row)).transpose()
}

/// [`TaskStore::task`](crate::TaskStore::task): the owner check is part of the query, so
/// another principal's task is never read.
pub(crate) async fn read(
    core: &Engine,
    task_id: &str,
    owner: &str,
) -> Result<Option<StoredTask>, StoreError> {
    let row = q(concat!(
        "SELECT ",
        task_columns!(),
        " FROM task WHERE task_id = $1 AND owner = $2"
    ))
    .bind(task_id)
    .bind(owner)
    .fetch_optional(&mut *core.db.read().await?)
    .await?;
    row.map(|mut row| task_from_row(&mut row)).transpose()
}

/// A write of one task under the feed's lock: the row as it is now, or `None` if it does not
/// exist (or is not `owner`'s).
async fn lock_task<'c>(
    core: &'c Engine,
    task_id: &str,
    owner: Option<&str>,
) -> Result<(Write<'c>, Option<StoredTask>), StoreError> {
    let mut w = core.write().await?;
    let task = fetch(w.conn(), task_id)
        .await?
        .filter(|t| owner.is_none_or(|o| t.owner == o));
    Ok((w, task))
}

/// Writes the mutable columns of `t` back, records the change and commits.
async fn save(mut w: Write<'_>, t: &StoredTask) -> Result<(), StoreError> {
    q(
        "UPDATE task SET status = $1, status_message = $2, updated_at_ms = $3, result = $4, \
       error = $5, input_requests = $6, input_responses = $7 WHERE task_id = $8",
    )
    .bind(t.status.as_str())
    .bind(t.status_message.as_deref())
    .bind(t.updated_at_ms)
    .bind(to_opt_json("result", t.result.as_ref())?)
    .bind(to_opt_json("error", t.error.as_ref())?)
    .bind(to_opt_json("input_requests", t.input_requests.as_ref())?)
    .bind(to_json("input_responses", &t.input_responses)?)
    .bind(&t.task_id)
    .execute(w.conn())
    .await?;
    w.change(ChangeKind::Task, &t.task_id).await?;
    w.commit().await
}

/// A status message cut to [`MAX_TASK_MESSAGE_BYTES`].
fn message(text: Option<&str>) -> Option<String> {
    text.map(|m| cut(m, MAX_TASK_MESSAGE_BYTES).to_owned())
}

/// The error object of a task the store fails.
fn store_failure(text: &str) -> Result<String, StoreError> {
    to_json(
        "error",
        &json!({"code": STORE_FAILURE_CODE, "message": text}),
    )
}

/// Fails every unfinished task that `sql` selects (`$1` error, `$2` now, `$3` message, `$4`
/// the replica if any) with `text`, in `w`; returns their ids (sorted).
pub(super) async fn fail_where(
    w: &mut Write<'_>,
    sql: &'static str,
    text: &str,
    replica: Option<&str>,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = q(sql).bind(store_failure(text)?).bind(now_ms()).bind(text);
    if let Some(replica) = replica {
        stmt = stmt.bind(replica);
    }
    let mut ids: Vec<String> = stmt.scalars(w.conn()).await?;
    ids.sort();
    for id in &ids {
        w.change(ChangeKind::Task, id).await?;
    }
    Ok(ids)
}

/// The message of a task failed because its replica's lease lapsed.
const LEASE_LAPSED: &str = "the replica running this task stopped (its lease lapsed) \
                                before the task finished";

/// The message of a task failed at its TTL.
const TTL_PASSED: &str = "the task was still running at the end of its TTL";

/// The message of a task failed because its replica restarted.
#[cfg(feature = "test-support")]
pub(super) const REPLICA_RESTARTED: &str = "the server running this task restarted before the task \
                                     finished";

#[async_trait]
impl TaskStore for Engine {
    async fn create_task(&self, task: NewTask) -> Result<StoredTask, StoreError> {
        let core = self;
        let now = now_ms();
        let (ttl_ms, expires_at_ms) = check_task(&task, now)?;
        let stored = StoredTask {
            task_id: task.task_id,
            owner: task.owner,
            source: task.source,
            tool: task.tool,
            version: task.version,
            status: TaskStatus::Working,
            status_message: None,
            created_at_ms: now,
            updated_at_ms: now,
            ttl_ms,
            expires_at_ms,
            poll_interval_ms: millis(task.poll_interval).max(1),
            result: None,
            error: None,
            input_requests: None,
            input_responses: JsonObject::new(),
            replica: task.replica,
            lease_expires_at_ms: now.saturating_add(millis(task.lease)),
        };
        let mut w = core.write().await?;
        if !insert_task(w.conn(), &stored).await? {
            return Err(StoreError::Duplicate {
                kind: NameKind::Task,
                name: stored.task_id,
            });
        }
        w.change(ChangeKind::Task, &stored.task_id).await?;
        w.commit().await?;
        Ok(stored)
    }

    async fn task(&self, task_id: &str, owner: &str) -> Result<Option<StoredTask>, StoreError> {
        read(self, task_id, owner).await
    }

    async fn task_for_replica(&self, task_id: &str) -> Result<Option<StoredTask>, StoreError> {
        let core = self;
        fetch(&mut *core.db.read().await?, task_id).await
    }

    /// [`TaskStore::heartbeat_tasks`](crate::TaskStore::heartbeat_tasks): one statement, not a
    /// change of the feed.
    async fn heartbeat_tasks(&self, replica: &str, lease: Duration) -> Result<u64, StoreError> {
        let core = self;
        let now = now_ms();
        let mut w = core.write_with(Lock::None).await?;
        let done = q("UPDATE task SET lease_expires_at_ms = $1 \
                      WHERE replica = $2 AND status IN ('working', 'input_required') \
                      AND lease_expires_at_ms > $3")
        .bind(now.saturating_add(millis(lease)))
        .bind(replica)
        .bind(now)
        .execute(w.conn())
        .await?;
        w.commit().await?;
        Ok(done)
    }

    async fn require_task_input(
        &self,
        task_id: &str,
        replica: &str,
        requests: JsonObject,
        status_message: Option<&str>,
    ) -> Result<bool, StoreError> {
        let core = self;
        if requests.is_empty() {
            return Err(crate::validate::invalid(
                "input_requests",
                "must ask at least one question",
            ));
        }
        let (w, task) = lock_task(core, task_id, None).await?;
        let Some(mut t) = task.filter(|t| !t.status.is_terminal() && t.replica == replica) else {
            return Ok(false);
        };
        t.status = TaskStatus::InputRequired;
        t.status_message = message(status_message);
        t.input_requests = Some(requests);
        t.updated_at_ms = now_ms();
        save(w, &t).await?;
        Ok(true)
    }

    async fn update_task(
        &self,
        task_id: &str,
        owner: &str,
        responses: JsonObject,
    ) -> Result<Vec<String>, StoreError> {
        let core = self;
        let (w, task) = lock_task(core, task_id, Some(owner)).await?;
        let mut t = task.ok_or_else(|| not_found(NameKind::Task, task_id))?;
        let Some(pending) = t.input_requests.as_mut() else {
            return Ok(Vec::new());
        };
        let mut accepted = Vec::new();
        for (key, answer) in responses {
            if pending.remove(&key).is_some() {
                t.input_responses.insert(key.clone(), answer);
                accepted.push(key);
            }
        }
        if accepted.is_empty() {
            return Ok(accepted);
        }
        if pending.is_empty() {
            t.input_requests = None;
            t.status = TaskStatus::Working;
            t.status_message = None;
        }
        t.updated_at_ms = now_ms();
        save(w, &t).await?;
        Ok(accepted)
    }

    async fn take_task_responses(
        &self,
        task_id: &str,
        replica: &str,
    ) -> Result<JsonObject, StoreError> {
        let core = self;
        let (w, task) = lock_task(core, task_id, None).await?;
        let Some(mut t) = task.filter(|t| !t.status.is_terminal() && t.replica == replica) else {
            return Ok(JsonObject::new());
        };
        if t.input_responses.is_empty() {
            return Ok(JsonObject::new());
        }
        let taken = std::mem::take(&mut t.input_responses);
        save(w, &t).await?;
        Ok(taken)
    }

    async fn finish_task(
        &self,
        task_id: &str,
        replica: &str,
        end: TaskEnd,
        status_message: Option<&str>,
    ) -> Result<bool, StoreError> {
        let core = self;
        let (w, task) = lock_task(core, task_id, None).await?;
        let Some(mut t) = task.filter(|t| !t.status.is_terminal() && t.replica == replica) else {
            return Ok(false);
        };
        match end {
            TaskEnd::Completed(result) => {
                t.status = TaskStatus::Completed;
                t.result = Some(result);
            }
            TaskEnd::Failed(error) => {
                if !error.get("code").is_some_and(Value::is_i64)
                    || !error.get("message").is_some_and(Value::is_string)
                {
                    return Err(crate::validate::invalid(
                        "error",
                        "must have an integer code and a string message",
                    ));
                }
                t.status = TaskStatus::Failed;
                t.error = Some(error);
            }
        }
        t.status_message = message(status_message);
        t.input_requests = None;
        t.input_responses = JsonObject::new();
        t.updated_at_ms = now_ms();
        save(w, &t).await?;
        Ok(true)
    }

    async fn cancel_task(&self, task_id: &str, owner: &str) -> Result<StoredTask, StoreError> {
        let core = self;
        let (w, task) = lock_task(core, task_id, Some(owner)).await?;
        let mut t = task.ok_or_else(|| not_found(NameKind::Task, task_id))?;
        if t.status.is_terminal() {
            return Ok(t);
        }
        t.status = TaskStatus::Cancelled;
        t.status_message = Some("cancelled by its owner".to_owned());
        t.input_requests = None;
        t.input_responses = JsonObject::new();
        t.updated_at_ms = now_ms();
        save(w, &t).await?;
        Ok(t)
    }

    async fn fail_lapsed_tasks(&self) -> Result<Vec<String>, StoreError> {
        let core = self;
        let mut w = core.write().await?;
        let mut ids = fail_where(
            &mut w,
            "UPDATE task SET status = 'failed', error = $1, updated_at_ms = $2, \
             status_message = $3, input_requests = NULL, input_responses = '{}' \
             WHERE status IN ('working', 'input_required') AND expires_at_ms <= $2 \
             RETURNING task_id",
            TTL_PASSED,
            None,
        )
        .await?;
        ids.extend(
            fail_where(
                &mut w,
                "UPDATE task SET status = 'failed', error = $1, updated_at_ms = $2, \
                 status_message = $3, input_requests = NULL, input_responses = '{}' \
                 WHERE status IN ('working', 'input_required') AND lease_expires_at_ms <= $2 \
                 RETURNING task_id",
                LEASE_LAPSED,
                None,
            )
            .await?,
        );
        w.commit().await?;
        Ok(ids)
    }

    /// [`TaskStore::purge_expired_tasks`](crate::TaskStore::purge_expired_tasks): terminal tasks
    /// past their TTL. Not a change (nobody runs them).
    async fn purge_expired_tasks(&self) -> Result<u64, StoreError> {
        let core = self;
        let mut w = core.write_with(Lock::None).await?;
        let done = q("DELETE FROM task WHERE expires_at_ms <= $1 \
                      AND status IN ('completed', 'failed', 'cancelled')")
        .bind(now_ms())
        .execute(w.conn())
        .await?;
        w.commit().await?;
        Ok(done)
    }

    /// [`TaskStore::count_tasks`](crate::TaskStore::count_tasks): one grouped read.
    async fn count_tasks(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError> {
        let core = self;
        let rows = q("SELECT status, COUNT(*) FROM task GROUP BY status")
            .fetch_all(&mut *core.db.read().await?)
            .await?;
        rows.into_iter()
            .map(|mut row| {
                let status: String = row.at(0)?;
                let n: i64 = row.at(1)?;
                let status = TaskStatus::parse(&status)
                    .ok_or_else(|| corrupt(format!("unknown task status {status:?}")))?;
                Ok((status, u64::try_from(n).unwrap_or(0)))
            })
            .collect()
    }
}

//! [`Tasks::start`]: a call as a task on this replica.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{CallSource, NewTask, StoreError, StoredTask, TaskEnd};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Tasks;
use crate::auth::PrincipalId;
use crate::context::task::TaskLink;

/// How long the watcher waits for a change before it reads the task anyway (a safety poll:
/// PostgreSQL's `LISTEN` and this instance's own writes wake it at once; another process's
/// writes to a SQLite file are seen at the next poll).
const WATCH_POLL: Duration = Duration::from_secs(1);

/// The JSON-RPC code of a task the server fails itself (internal error).
const INTERNAL_ERROR: i64 = -32603;

/// What a task runs.
#[derive(Debug, Clone)]
pub(crate) struct TaskCall {
    /// The principal that calls: the task's owner (stored as its canonical text, the one
    /// namespace kept outputs and sessions share).
    pub(crate) owner: PrincipalId,
    /// Stored or manifest.
    pub(crate) source: CallSource,
    /// The tool's name.
    pub(crate) tool: String,
    /// The stored tool's version.
    pub(crate) version: Option<u32>,
    /// The call's timeout: the task's TTL is never shorter.
    pub(crate) timeout: Duration,
}

impl Tasks {
    /// Creates the task in the store (so that any replica resolves its id once this returns)
    /// and runs `run` for it on this replica. `run` gets the task's [`TaskLink`] (for the
    /// call's questions) and a token that fires when the task
    /// ends without it (cancelled by its owner, failed by a sweep) or the server stops; it
    /// must then stop (a script call kills its process tree) and return.
    ///
    /// # Errors
    /// The store's, when the task cannot be created; `run` is not started then.
    pub(crate) async fn start<F, Fut>(
        self: &Arc<Self>,
        call: TaskCall,
        run: F,
    ) -> Result<StoredTask, StoreError>
    where
        F: FnOnce(CancellationToken, TaskLink) -> Fut,
        Fut: Future<Output = TaskEnd> + Send + 'static,
    {
        let (task, link) = self.create(call).await?;
        let ct = self.run_token();
        let running = run(ct.clone(), link);
        self.adopt(task.task_id.clone(), ct, running);
        Ok(task)
    }

    /// Creates the task in the store, this replica its runner, and returns it with the link
    /// its call carries. Nothing runs it yet: [`Tasks::adopt`] does.
    ///
    /// # Errors
    /// The store's.
    pub(crate) async fn create(
        &self,
        call: TaskCall,
    ) -> Result<(StoredTask, TaskLink), StoreError> {
        let ttl = self.settings.ttl.max(call.timeout);
        let task = self
            .store
            .create_task(NewTask {
                task_id: format!("task-{}", uuid::Uuid::new_v4().simple()),
                owner: call.owner.as_str().to_owned(),
                source: call.source,
                tool: call.tool,
                version: call.version,
                replica: self.replica.clone(),
                ttl: Some(ttl),
                poll_interval: self.settings.poll_interval,
                lease: self.settings.lease,
            })
            .await?;
        let link = TaskLink {
            store: self.store.clone(),
            task_id: task.task_id.clone(),
            replica: self.replica.clone(),
            ttl,
        };
        Ok((task, link))
    }

    /// A cancellation token for a task's call: it fires when the server stops, and when
    /// [`Tasks::adopt`] hears that the task ended elsewhere.
    pub(crate) fn run_token(&self) -> CancellationToken {
        self.stop.child_token()
    }

    /// Drives `running`, the call of the created task `task_id` (its cancellation `ct`, from
    /// [`Tasks::run_token`]), to its end on this replica: writes the end, or stops the call
    /// when the task ends elsewhere first.
    pub(crate) fn adopt(
        self: &Arc<Self>,
        task_id: String,
        ct: CancellationToken,
        running: impl Future<Output = TaskEnd> + Send + 'static,
    ) {
        tokio::spawn(drive(self.clone(), task_id, ct, running));
    }
}

/// Runs one task to its end on this replica.
async fn drive(
    tasks: Arc<Tasks>,
    task_id: String,
    ct: CancellationToken,
    running: impl Future<Output = TaskEnd>,
) {
    let ended_elsewhere = ended(&tasks, &task_id, &ct);
    tokio::pin!(running);
    let end = tokio::select! {
        end = &mut running => end,
        () = ended_elsewhere => {
            // Cancelled or swept: stop the call and wait for it to be gone. Its end is not
            // written (the task is terminal already).
            ct.cancel();
            running.await;
            return;
        }
    };
    ct.cancel();
    let (end, message) = if tasks.stop.is_cancelled() {
        let text = "the server running this task stopped before the task finished";
        (
            TaskEnd::Failed(object(json!({"code": INTERNAL_ERROR, "message": text}))),
            Some(text),
        )
    } else {
        (end, None)
    };
    match tasks
        .store
        .finish_task(&task_id, &tasks.replica, end, message)
        .await
    {
        Ok(true) => {}
        Ok(false) => tracing::debug!(task = %task_id, "task ended before its call did"),
        Err(e) => tracing::warn!(task = %task_id, error = %e, "writing a task's end"),
    }
}

/// Returns when the store says the task ended (it is terminal or gone), or never once `ct`
/// fired (the call is ending by itself).
async fn ended(tasks: &Tasks, task_id: &str, ct: &CancellationToken) {
    let store = &tasks.store;
    loop {
        let seq = match store.current_seq().await {
            Ok(seq) => seq,
            Err(e) => {
                tracing::warn!(task = %task_id, error = %e, "watching a task");
                tokio::time::sleep(WATCH_POLL).await;
                continue;
            }
        };
        match store.task_for_replica(task_id).await {
            Ok(Some(t)) if !t.status.is_terminal() => {}
            Ok(_) => return,
            Err(e) => tracing::warn!(task = %task_id, error = %e, "watching a task"),
        }
        tokio::select! {
            () = ct.cancelled() => std::future::pending::<()>().await,
            () = store.wait_for_change(seq, WATCH_POLL) => {}
        }
    }
}

/// A JSON object literal.
fn object(value: serde_json::Value) -> omniforge_store::JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        _ => omniforge_store::JsonObject::new(),
    }
}

//! The task a call runs as (issue 13): [`TaskLink`], and [`TaskStarter`], the task a running
//! call starts itself (`taskStart: "script"`).
//!
//! A task-supporting call of a tool whose task starts in its script runs first as an
//! ordinary request (its questions are input-required rounds). The call's context carries a
//! starter; the script's `omniforge.start_task()` comes to [`TaskStarter::start`], which
//! creates the durable task (through a function the `mcp` layer gives, since creating a task
//! is above this layer) and tells the waiting request, which answers the task. From then on
//! the call is that task: [`TaskStarter::link`] is its [`TaskLink`]. When the request ends
//! first (cancelled, dropped), [`TaskStarter::abandon`] stops the run; a task created in the
//! same instant is failed at once, so it never stays `working` without a run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use omniforge_store::{Store, StoreError, StoredTask, TaskEnd};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// The task a call runs as (issue 13), put into the call's request context by the task
/// runner: where the script's questions and their answers meet.
#[derive(Clone)]
pub(crate) struct TaskLink {
    /// The store holding the task.
    pub(crate) store: Arc<dyn Store>,
    /// The task's id.
    pub(crate) task_id: String,
    /// The replica running it (only it may set its pending input and take the answers).
    pub(crate) replica: String,
    /// How long the task is kept: what the call keeps for it (a cut result's whole output)
    /// lasts at least as long.
    pub(crate) ttl: Duration,
}

/// Creates the task in the store and returns it with the link its call carries.
pub(crate) type CreateTask =
    Box<dyn FnOnce() -> BoxFuture<'static, Result<(StoredTask, TaskLink), StoreError>> + Send>;

/// Why a script's `start_task` did not start a task.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// The store could not create the task: the call goes on as an ordinary request.
    #[error("the task could not be created (the call goes on without one): {0}")]
    Store(#[source] StoreError),
    /// The request that made the call ended first: the run is stopping.
    #[error("the request that made this call ended before its task started")]
    RequestEnded,
    /// An earlier `start_task` of this call could not create its task.
    #[error("this call's task could not be created; the call goes on without one")]
    Unavailable,
}

/// The task a running call may start (see the module docs). Shared by the call's context
/// (the script's side) and the request that waits for it.
pub(crate) struct TaskStarter {
    state: Mutex<State>,
    /// The run's cancellation: fired by [`TaskStarter::abandon`] while no task exists.
    run_ct: CancellationToken,
}

enum State {
    /// No task yet; `start` may create it and tell the request through `started`.
    Pending {
        create: CreateTask,
        started: oneshot::Sender<StoredTask>,
    },
    /// `start` is creating the task.
    Starting,
    /// The call is this task.
    Started(TaskLink),
    /// The task could not be created: the call ends as an ordinary request.
    Inline,
    /// The request ended without a task: the run is stopped.
    Abandoned,
}

impl TaskStarter {
    /// A starter whose `start` runs `create` and sends the task on `started`; `run_ct`
    /// stops the call.
    pub(crate) fn new(
        create: CreateTask,
        started: oneshot::Sender<StoredTask>,
        run_ct: CancellationToken,
    ) -> Arc<TaskStarter> {
        Arc::new(TaskStarter {
            state: Mutex::new(State::Pending { create, started }),
            run_ct,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The task the call runs as, once started.
    pub(crate) fn link(&self) -> Option<TaskLink> {
        match &*self.state() {
            State::Started(link) => Some(link.clone()),
            _ => None,
        }
    }

    /// Starts the task (once; a second call answers the same task).
    ///
    /// # Errors
    /// The store failed (the call goes on without a task), or the request ended first.
    pub(crate) async fn start(&self) -> Result<TaskLink, StartError> {
        let (create, started) = {
            let mut state = self.state();
            match std::mem::replace(&mut *state, State::Starting) {
                State::Pending { create, started } => (create, started),
                State::Started(link) => {
                    *state = State::Started(link.clone());
                    return Ok(link);
                }
                State::Abandoned => {
                    *state = State::Abandoned;
                    return Err(StartError::RequestEnded);
                }
                // A creation that failed, or (a script asking twice at once) one under way.
                other => {
                    *state = other;
                    return Err(StartError::Unavailable);
                }
            }
        };
        let (task, link) = match create().await {
            Ok(created) => created,
            Err(e) => {
                let mut state = self.state();
                if !matches!(*state, State::Abandoned) {
                    *state = State::Inline;
                }
                return Err(StartError::Store(e));
            }
        };
        let abandoned = {
            let mut state = self.state();
            if matches!(*state, State::Abandoned) {
                true
            } else {
                *state = State::Started(link.clone());
                false
            }
        };
        if abandoned {
            // Nobody will hear of this task: fail it now rather than leave it working until
            // its lease lapses, and stop the run.
            let mut error = serde_json::Map::new();
            error.insert("code".into(), json!(-32603));
            error.insert(
                "message".into(),
                json!(StartError::RequestEnded.to_string()),
            );
            if let Err(e) = link
                .store
                .finish_task(&task.task_id, &link.replica, TaskEnd::Failed(error), None)
                .await
            {
                tracing::warn!(task = %task.task_id, error = %e, "failing an abandoned task");
            }
            self.run_ct.cancel();
            return Err(StartError::RequestEnded);
        }
        // The request waits on the other end as long as the run lasts.
        if started.send(task).is_err() {
            tracing::debug!("a started task's request was gone");
        }
        Ok(link)
    }

    /// The request ended (answered inline, cancelled or dropped): when no task runs, the run
    /// stops (a task being created is failed as soon as it exists).
    pub(crate) fn abandon(&self) {
        let mut state = self.state();
        match &*state {
            State::Pending { .. } | State::Inline => {
                *state = State::Abandoned;
                self.run_ct.cancel();
            }
            State::Starting => *state = State::Abandoned,
            State::Started(_) | State::Abandoned => {}
        }
    }
}

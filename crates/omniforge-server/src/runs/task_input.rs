//! A script's questions inside a task (issue 13; Tasks extension, SEP-2663): live, not
//! replayed. The round's questions become the task's `inputRequests` in the store (status
//! `input_required`); the client reads them with `tasks/get` and answers with `tasks/update`
//! on any replica, which writes the answers to the store as a change of the feed; this
//! replica hears the change, takes the answers and, once every question of the round has
//! one (answers may come in several updates), hands them to the script, which goes on. The
//! task is `working` again as soon as nothing is pending.

use std::time::Duration;

use omniforge_script::RpcError;
use rmcp::model::{ClientCapabilities, JsonObject};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::context::task::TaskLink;
use crate::runs::questions::code;
use crate::runs::questions::{self, Ask, error};

/// How long the wait for answers sleeps before it looks at the store anyway (a safety poll:
/// PostgreSQL's `LISTEN` and this instance's own writes wake it at once).
const POLL: Duration = Duration::from_secs(1);

/// What a task shows while it waits.
const WAITING: &str = "waiting for the client's answers (tasks/update)";

/// Asks `ask` through the task's store record and waits for every answer; the answers come
/// back as the live client's would: `{"responses": {KEY: result}}` (an old helper's single
/// request: the bare result).
///
/// # Errors
/// No question, a capability the client did not declare, the task ended (cancelled, failed
/// by a sweep), the script's `timeout_s` passed, or a store failure.
pub(crate) async fn ask(
    task: &TaskLink,
    capabilities: Option<&ClientCapabilities>,
    ask: &Ask,
    ended: &CancellationToken,
) -> Result<Value, RpcError> {
    if ask.questions.is_empty() {
        return Err(error(code::INVALID_PARAMS, "no question"));
    }
    match capabilities {
        Some(capabilities) => questions::check_declared(ask, capabilities)?,
        None => {
            return Err(error(
                code::METHOD_NOT_FOUND,
                "the client's capabilities are unknown, so nothing can be asked",
            ));
        }
    }
    let mut requests = JsonObject::new();
    let mut keys = Vec::with_capacity(ask.questions.len());
    for (i, question) in ask.questions.iter().enumerate() {
        let key = question
            .key
            .clone()
            .unwrap_or_else(|| format!("q{}", i + 1));
        requests.insert(
            key.clone(),
            json!({
                "method": question.kind.method(),
                "params": question.params.clone().unwrap_or_default(),
            }),
        );
        keys.push(key);
    }
    let store = &task.store;
    let asked = store
        .require_task_input(&task.task_id, &task.replica, requests, Some(WAITING))
        .await
        .map_err(store_error)?;
    if !asked {
        return Err(error(
            code::INTERNAL_ERROR,
            "the task ended before its answers",
        ));
    }
    let deadline = ask.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut answers = JsonObject::new();
    loop {
        // Read the counter before taking, so that an answer written in between wakes the wait.
        let seq = store.current_seq().await.map_err(store_error)?;
        let taken = store
            .take_task_responses(&task.task_id, &task.replica)
            .await
            .map_err(store_error)?;
        for (key, answer) in taken {
            if keys.contains(&key) {
                answers.insert(key, answer);
            }
        }
        if keys.iter().all(|k| answers.contains_key(k)) {
            break;
        }
        let timeout = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = ended.cancelled() => {
                return Err(error(code::INTERNAL_ERROR, "the task ended before its answers"));
            }
            () = timeout => {
                return Err(error(code::TIMEOUT, "the client did not answer in time"));
            }
            () = store.wait_for_change(seq, POLL) => {}
        }
    }
    if ask.legacy {
        return Ok(keys
            .first()
            .and_then(|k| answers.remove(k))
            .unwrap_or(Value::Null));
    }
    Ok(json!({"responses": answers}))
}

/// A store failure, for the script (the details are logged).
fn store_error(e: omniforge_store::StoreError) -> RpcError {
    tracing::warn!(error = %e, "a task's questions");
    error(code::INTERNAL_ERROR, "the task store failed")
}

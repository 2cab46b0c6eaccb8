//! The task runner and the lease loop on a real SQLite file, opened twice as two replicas
//! would, with a real child process as the call.

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{
    CallSource, JsonObject, NewTask, SqliteStore, Store, StoredTask, TaskEnd, TaskStatus,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::lease::beat_once;
use super::runner::TaskCall;
use super::{TaskSettings, Tasks};
use crate::auth::PrincipalId;
use crate::context::task::{CreateTask, StartError, TaskStarter};

async fn stores() -> (tempfile::TempDir, Arc<dyn Store>, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let a: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let b: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    (dir, a, b)
}

fn call(owner: &str) -> TaskCall {
    TaskCall {
        owner: PrincipalId::parse(owner).unwrap(),
        source: CallSource::Manifest,
        tool: "svc_Slow".into(),
        version: None,
        timeout: Duration::from_secs(60),
    }
}

fn text_result(text: &str) -> JsonObject {
    let v = json!({"content": [{"type": "text", "text": text}], "isError": false});
    v.as_object().unwrap().clone()
}

/// Waits (on the change feed, polling as a safety) until `owner`'s task is terminal.
async fn until_terminal(store: &Arc<dyn Store>, id: &str, owner: &str) -> StoredTask {
    for _ in 0..600 {
        let seq = store.current_seq().await.unwrap();
        let task = store.task(id, owner).await.unwrap().unwrap();
        if task.status.is_terminal() {
            return task;
        }
        store.wait_for_change(seq, Duration::from_millis(100)).await;
    }
    panic!("task {id} did not end");
}

#[tokio::test]
async fn a_finished_call_completes_its_task_for_every_replica() {
    let (_dir, a, b) = stores().await;
    let tasks = Tasks::new(a, TaskSettings::default(), CancellationToken::new());
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let task = tasks
        .start(call("token:alice"), |_ct, _link| async move {
            let _ = wait.await;
            TaskEnd::Completed(text_result("slow done"))
        })
        .await
        .unwrap();
    // Created before the call ends, and readable through the other replica at once.
    assert_eq!(task.status, TaskStatus::Working);
    assert_eq!(task.ttl_ms, Some(24 * 3600 * 1000));
    assert_eq!(task.poll_interval_ms, 1000);
    let seen = b.task(&task.task_id, "token:alice").await.unwrap().unwrap();
    assert_eq!(seen.status, TaskStatus::Working);
    assert_eq!(seen.replica, tasks.replica());
    assert_eq!(b.task(&task.task_id, "token:bob").await.unwrap(), None);
    go.send(()).unwrap();
    let done = until_terminal(&b, &task.task_id, "token:alice").await;
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.result, Some(text_result("slow done")));
}

#[tokio::test]
async fn the_ttl_is_never_shorter_than_the_call_timeout() {
    let (_dir, a, _b) = stores().await;
    let settings = TaskSettings {
        ttl: Duration::from_secs(5),
        ..TaskSettings::default()
    };
    let tasks = Tasks::new(a, settings, CancellationToken::new());
    let task = tasks
        .start(call("token:alice"), |_ct, _link| async {
            TaskEnd::Completed(text_result("ok"))
        })
        .await
        .unwrap();
    assert_eq!(task.ttl_ms, Some(60_000));
}

#[tokio::test]
async fn a_cancel_through_another_replica_kills_the_process() {
    let (_dir, a, b) = stores().await;
    let tasks = Tasks::new(a, TaskSettings::default(), CancellationToken::new());
    let (pid_tx, pid_rx) = tokio::sync::oneshot::channel();
    let task = tasks
        .start(call("token:alice"), |ct, _link| async move {
            let mut child = tokio::process::Command::new("sleep")
                .arg("300")
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let _ = pid_tx.send(child.id().unwrap());
            tokio::select! {
                _ = child.wait() => TaskEnd::Completed(text_result("slept")),
                () = ct.cancelled() => {
                    child.kill().await.unwrap();
                    TaskEnd::Completed(text_result("killed"))
                }
            }
        })
        .await
        .unwrap();
    let pid = pid_rx.await.unwrap();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc_dir.exists());
    let cancelled = b.cancel_task(&task.task_id, "token:alice").await.unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    // The runner hears it (at its next poll: another process's write to a SQLite file) and
    // stops the call; the process is killed and reaped.
    for _ in 0..300 {
        if !proc_dir.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !proc_dir.exists(),
        "the call's process outlived its cancelled task"
    );
    // The call's own end does not undo the cancel.
    let after = b.task(&task.task_id, "token:alice").await.unwrap().unwrap();
    assert_eq!(after.status, TaskStatus::Cancelled);
    assert_eq!(after.result, None);
}

#[tokio::test]
async fn a_dead_replicas_task_fails_at_the_next_beat_and_a_live_one_is_renewed() {
    let (_dir, a, b) = stores().await;
    // A task of a replica that died: its lease is over.
    b.create_task(NewTask {
        task_id: "task-orphan".into(),
        owner: "token:alice".into(),
        source: CallSource::Manifest,
        tool: "svc_Slow".into(),
        version: None,
        replica: "replica-gone".into(),
        ttl: Some(Duration::from_secs(3600)),
        poll_interval: Duration::from_secs(1),
        lease: Duration::ZERO,
    })
    .await
    .unwrap();
    let tasks = Tasks::new(a, TaskSettings::default(), CancellationToken::new());
    let live = tasks
        .start(call("token:alice"), |ct, _link| async move {
            ct.cancelled().await;
            TaskEnd::Completed(text_result("stopped"))
        })
        .await
        .unwrap();
    beat_once(&tasks).await;
    let orphan = b.task("task-orphan", "token:alice").await.unwrap().unwrap();
    assert_eq!(orphan.status, TaskStatus::Failed);
    let message = orphan.error.unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("replica running this task stopped"),
        "{message}"
    );
    let renewed = b.task(&live.task_id, "token:alice").await.unwrap().unwrap();
    assert_eq!(renewed.status, TaskStatus::Working);
    assert!(renewed.lease_expires_at_ms >= live.lease_expires_at_ms);
}

#[tokio::test]
async fn stopping_the_server_fails_its_running_tasks_with_a_message() {
    let (_dir, a, b) = stores().await;
    let stop = CancellationToken::new();
    let tasks = Tasks::new(a, TaskSettings::default(), stop.clone());
    let task = tasks
        .start(call("token:alice"), |ct, _link| async move {
            ct.cancelled().await;
            TaskEnd::Completed(text_result("[cancelled]"))
        })
        .await
        .unwrap();
    stop.cancel();
    let ended = until_terminal(&b, &task.task_id, "token:alice").await;
    assert_eq!(ended.status, TaskStatus::Failed);
    let error = ended.error.unwrap();
    assert_eq!(error["code"], json!(-32603));
    assert!(error["message"].as_str().unwrap().contains("stopped"));
}

/// A starter over `tasks` whose creation first says it began (`entered`), then waits for
/// `gate`.
fn gated_starter(
    tasks: &Arc<Tasks>,
    run_ct: &CancellationToken,
) -> (
    Arc<TaskStarter>,
    tokio::sync::oneshot::Receiver<StoredTask>,
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (started, told) = tokio::sync::oneshot::channel();
    let (entered_tx, entered) = tokio::sync::oneshot::channel();
    let (gate, gate_rx) = tokio::sync::oneshot::channel::<()>();
    let tasks = tasks.clone();
    let create: CreateTask = Box::new(move || {
        Box::pin(async move {
            let _ = entered_tx.send(());
            let _ = gate_rx.await;
            tasks.create(call("token:alice")).await
        })
    });
    (
        TaskStarter::new(create, started, run_ct.clone()),
        told,
        entered,
        gate,
    )
}

#[tokio::test]
async fn a_script_started_task_is_created_once_and_told_to_the_request() {
    let (_dir, a, _b) = stores().await;
    let tasks = Tasks::new(a.clone(), TaskSettings::default(), CancellationToken::new());
    let run_ct = tasks.run_token();
    let (starter, told, _entered, gate) = gated_starter(&tasks, &run_ct);
    gate.send(()).unwrap();
    let link = starter.start().await.unwrap();
    assert_eq!(told.await.unwrap().task_id, link.task_id);
    assert_eq!(starter.link().unwrap().task_id, link.task_id);
    // A second start_task answers the same task; the request ending leaves the run alone.
    assert_eq!(starter.start().await.unwrap().task_id, link.task_id);
    starter.abandon();
    assert!(!run_ct.is_cancelled());
    let task = a.task(&link.task_id, "token:alice").await.unwrap().unwrap();
    assert_eq!(task.status, TaskStatus::Working);
}

#[tokio::test]
async fn a_task_started_as_its_request_ends_is_failed_and_its_run_stopped() {
    let (_dir, a, _b) = stores().await;
    let tasks = Tasks::new(a.clone(), TaskSettings::default(), CancellationToken::new());
    // The request ends while the task is being created: the task is failed at once.
    let run_ct = tasks.run_token();
    let (starter, told, entered, gate) = gated_starter(&tasks, &run_ct);
    let starting = tokio::spawn({
        let starter = starter.clone();
        async move { starter.start().await }
    });
    entered.await.unwrap();
    starter.abandon();
    assert!(!run_ct.is_cancelled(), "stopped before the task existed");
    gate.send(()).unwrap();
    let refused = starting.await.unwrap();
    assert!(matches!(refused, Err(StartError::RequestEnded)));
    assert!(run_ct.is_cancelled());
    assert!(told.await.is_err(), "the request was told of a task");
    assert!(starter.link().is_none());
    // The one task created is failed, not left working until its lease lapses.
    assert_eq!(
        a.count_tasks().await.unwrap(),
        [(TaskStatus::Failed, 1)],
        "the abandoned task"
    );
    // Before any start: the run stops, and a later start creates nothing.
    let run_ct = tasks.run_token();
    let (starter, _told, entered, _gate) = gated_starter(&tasks, &run_ct);
    starter.abandon();
    assert!(run_ct.is_cancelled());
    assert!(matches!(
        starter.start().await,
        Err(StartError::RequestEnded)
    ));
    drop(starter);
    assert!(entered.await.is_err(), "the task was created");
}

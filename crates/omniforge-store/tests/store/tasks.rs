//! Durable tasks (issue 13): created working and readable through every instance, owned (any
//! other principal reads them as unknown), input requests answered in parts, cancels and
//! updates announced on the change feed, terminal states final, lapsed leases and TTLs failed
//! with a message, a restarted replica's tasks failed, expired tasks purged, copies.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::time::Duration;

use omniforge_store::{
    CallSource, ChangeKind, JsonObject, NameKind, NewTask, StoreError, TaskEnd, TaskStatus,
    TaskStore, ToolStore as _,
};
use serde_json::json;

use crate::util::{Kind, TestStore, each_backend, object};

const HOUR: Duration = Duration::from_secs(3600);

fn task(id: &str, owner: &str, replica: &str) -> NewTask {
    NewTask {
        task_id: id.into(),
        owner: owner.into(),
        source: CallSource::Stored,
        tool: "slow_compute".into(),
        version: Some(3),
        replica: replica.into(),
        ttl: Some(HOUR),
        poll_interval: Duration::from_millis(250),
        lease: Duration::from_secs(30),
    }
}

fn result(text: &str) -> JsonObject {
    object(json!({"content": [{"type": "text", "text": text}], "isError": true}))
}

fn ask(keys: &[&str]) -> JsonObject {
    keys.iter()
        .map(|k| {
            (
                (*k).to_owned(),
                json!({"method": "elicitation/create", "params": {"message": k}}),
            )
        })
        .collect()
}

fn not_found(id: &str) -> impl Fn(&StoreError) -> bool + '_ {
    move |e| matches!(e, StoreError::NotFound { kind: NameKind::Task, name, version: None } if name == id)
}

each_backend! {
    async fn a_task_completes_once_and_only_its_owner_sees_it(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let created = s.create_task(task("tsk-1", "token:alice", "replica-a")).await.unwrap();
    assert_eq!(created.status, TaskStatus::Working);
    assert_eq!(created.ttl_ms, Some(3_600_000));
    assert_eq!(created.expires_at_ms, Some(created.created_at_ms + 3_600_000));
    assert_eq!(created.poll_interval_ms, 250);
    assert_eq!(created.lease_expires_at_ms, created.created_at_ms + 30_000);
    // Readable at once through another instance (another replica).
    let other = t.second().await;
    assert_eq!(other.task("tsk-1", "token:alice").await.unwrap(), Some(created.clone()));
    // Another principal gets exactly what an unknown id gets, for reads, updates and cancels.
    for who in ["token:bob", "token:ALICE", "token:alice ", ""] {
        assert_eq!(s.task("tsk-1", who).await.unwrap(), None, "{who:?}");
        let e = s.update_task("tsk-1", who, ask(&["x"])).await.unwrap_err();
        assert!(not_found("tsk-1")(&e), "{e:?}");
        let e = s.cancel_task("tsk-1", who).await.unwrap_err();
        assert!(not_found("tsk-1")(&e), "{e:?}");
    }
    assert_eq!(s.task("tsk-404", "token:alice").await.unwrap(), None);
    let e = s.cancel_task("tsk-404", "token:alice").await.unwrap_err();
    assert!(not_found("tsk-404")(&e), "{e:?}");
    // Another replica's write is refused; the task's own replica completes it.
    assert!(!other
        .finish_task("tsk-1", "replica-b", TaskEnd::Completed(result("no")), None)
        .await
        .unwrap());
    assert!(s
        .finish_task("tsk-1", "replica-a", TaskEnd::Completed(result("boom ünï")), None)
        .await
        .unwrap());
    let done = other.task("tsk-1", "token:alice").await.unwrap().unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.result, Some(result("boom ünï")));
    assert_eq!((done.error, done.input_requests), (None, None));
    // Terminal is final: a late end, a cancel (acknowledged, nothing changes), a sweep.
    let failure = object(json!({"code": -32603, "message": "late"}));
    assert!(!s.finish_task("tsk-1", "replica-a", TaskEnd::Failed(failure), None).await.unwrap());
    let after_cancel = s.cancel_task("tsk-1", "token:alice").await.unwrap();
    assert_eq!(after_cancel.status, TaskStatus::Completed);
    assert_eq!(s.fail_replica_tasks("replica-a").await.unwrap(), Vec::<String>::new());
    assert_eq!(s.task("tsk-1", "token:alice").await.unwrap().unwrap().status, TaskStatus::Completed);
    // The id stays taken.
    let e = s.create_task(task("tsk-1", "token:bob", "replica-a")).await.unwrap_err();
    assert!(matches!(e, StoreError::Duplicate { kind: NameKind::Task, .. }), "{e:?}");
    }
}

each_backend! {
    async fn answers_arrive_in_parts_and_the_task_works_again(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_task(task("tsk-in", "token:alice", "replica-a")).await.unwrap();
    // Answers to a task that asks nothing are ignored.
    assert!(s.update_task("tsk-in", "token:alice", ask(&["name"])).await.unwrap().is_empty());
    assert!(s
        .require_task_input("tsk-in", "replica-a", ask(&["name", "confirm"]), Some("two questions"))
        .await
        .unwrap());
    let waiting = s.task("tsk-in", "token:alice").await.unwrap().unwrap();
    assert_eq!(waiting.status, TaskStatus::InputRequired);
    assert_eq!(waiting.input_requests, Some(ask(&["name", "confirm"])));
    assert_eq!(waiting.status_message.as_deref(), Some("two questions"));
    // One answer and an unasked key: the answer is taken, the other ignored.
    let first = object(json!({
        "name": {"action": "accept", "content": {"name": "partial-1"}},
        "unasked": {"action": "accept"}
    }));
    assert_eq!(s.update_task("tsk-in", "token:alice", first).await.unwrap(), ["name"]);
    let partly = s.task("tsk-in", "token:alice").await.unwrap().unwrap();
    assert_eq!(partly.status, TaskStatus::InputRequired);
    assert_eq!(partly.input_requests, Some(ask(&["confirm"])));
    // Another replica takes nothing; the task's replica takes the answer once.
    assert!(s.take_task_responses("tsk-in", "replica-b").await.unwrap().is_empty());
    let taken = s.take_task_responses("tsk-in", "replica-a").await.unwrap();
    assert_eq!(
        taken,
        object(json!({"name": {"action": "accept", "content": {"name": "partial-1"}}}))
    );
    assert!(s.take_task_responses("tsk-in", "replica-a").await.unwrap().is_empty());
    // The last answer: working again, nothing pending.
    let last = object(json!({"confirm": {"action": "accept", "content": {"confirm": true}}}));
    assert_eq!(s.update_task("tsk-in", "token:alice", last.clone()).await.unwrap(), ["confirm"]);
    let working = s.task("tsk-in", "token:alice").await.unwrap().unwrap();
    assert_eq!(working.status, TaskStatus::Working);
    assert_eq!((working.input_requests, working.status_message), (None, None));
    assert_eq!(s.take_task_responses("tsk-in", "replica-a").await.unwrap(), last);
    // No question, no input_required.
    let e = s
        .require_task_input("tsk-in", "replica-a", JsonObject::new(), None)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid { ref field, .. } if field == "input_requests"), "{e:?}");
    }
}

each_backend! {
    async fn a_cancel_reaches_the_running_replica_through_the_feed(kind) {
    let t = TestStore::new(kind).await;
    let client_side = &*t.store;
    let runner = t.second().await;
    client_side.create_task(task("tsk-c", "token:alice", "replica-a")).await.unwrap();
    runner.require_task_input("tsk-c", "replica-a", ask(&["confirm"]), None).await.unwrap();
    let seen = runner.current_seq().await.unwrap();
    let cancelled = client_side.cancel_task("tsk-c", "token:alice").await.unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert_eq!(cancelled.input_requests, None);
    let changes = runner.changes_since(seen).await.unwrap();
    assert_eq!(changes.keys(ChangeKind::Task).collect::<Vec<_>>(), ["tsk-c"]);
    let now = runner.task_for_replica("tsk-c").await.unwrap().unwrap();
    assert_eq!(now.status, TaskStatus::Cancelled);
    // The process's late result does not undo the cancel.
    assert!(!runner
        .finish_task("tsk-c", "replica-a", TaskEnd::Completed(result("late")), None)
        .await
        .unwrap());
    assert_eq!(client_side.task("tsk-c", "token:alice").await.unwrap().unwrap().status, TaskStatus::Cancelled);
    // Idempotent: a second cancel acknowledges and changes nothing.
    let seq = runner.current_seq().await.unwrap();
    client_side.cancel_task("tsk-c", "token:alice").await.unwrap();
    assert_eq!(runner.current_seq().await.unwrap(), seq);
    }
}

each_backend! {
    async fn lapsed_leases_and_ttls_fail_tasks_with_a_message(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    // A replica that died: its lease is over at once.
    let dead = NewTask { lease: Duration::ZERO, ..task("tsk-dead", "token:alice", "replica-dead") };
    s.create_task(dead).await.unwrap();
    // A task at the end of its TTL while its replica is alive.
    let short = NewTask { ttl: Some(Duration::from_millis(1)), ..task("tsk-ttl", "token:alice", "replica-a") };
    s.create_task(short).await.unwrap();
    s.create_task(task("tsk-alive", "token:alice", "replica-a")).await.unwrap();
    // A lapsed lease is never renewed; a live one is.
    assert_eq!(s.heartbeat_tasks("replica-dead", Duration::from_secs(30)).await.unwrap(), 0);
    assert_eq!(s.heartbeat_tasks("replica-a", Duration::from_secs(60)).await.unwrap(), 2);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut failed = s.fail_lapsed_tasks().await.unwrap();
    failed.sort();
    assert_eq!(failed, ["tsk-dead", "tsk-ttl"]);
    for (id, words) in [("tsk-dead", "lease lapsed"), ("tsk-ttl", "TTL")] {
        let task = s.task(id, "token:alice").await.unwrap().unwrap();
        assert_eq!(task.status, TaskStatus::Failed, "{id}");
        let error = task.error.unwrap();
        assert_eq!(error["code"], json!(-32603));
        assert!(error["message"].as_str().unwrap().contains(words), "{error:?}");
        assert!(task.status_message.unwrap().contains(words));
        assert_eq!(task.result, None);
    }
    assert_eq!(s.task("tsk-alive", "token:alice").await.unwrap().unwrap().status, TaskStatus::Working);
    assert!(s.fail_lapsed_tasks().await.unwrap().is_empty());
    // Only terminal tasks past their TTL are purged.
    assert_eq!(s.purge_expired_tasks().await.unwrap(), 1);
    assert_eq!(s.task("tsk-ttl", "token:alice").await.unwrap(), None);
    assert!(s.task("tsk-dead", "token:alice").await.unwrap().is_some());
    assert!(s.task("tsk-alive", "token:alice").await.unwrap().is_some());
    }
}

each_backend! {
    async fn a_restarted_replica_fails_only_its_unfinished_tasks(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    for (id, replica) in [("a-1", "replica-a"), ("a-2", "replica-a"), ("a-done", "replica-a"), ("b-1", "replica-b")] {
        s.create_task(task(id, "token:alice", replica)).await.unwrap();
    }
    s.finish_task("a-done", "replica-a", TaskEnd::Completed(result("ok")), None).await.unwrap();
    s.require_task_input("a-2", "replica-a", ask(&["q"]), None).await.unwrap();
    let seen = s.current_seq().await.unwrap();
    assert_eq!(s.fail_replica_tasks("replica-a").await.unwrap(), ["a-1", "a-2"]);
    let changes = s.changes_since(seen).await.unwrap();
    assert_eq!(changes.keys(ChangeKind::Task).collect::<Vec<_>>(), ["a-1", "a-2"]);
    for id in ["a-1", "a-2"] {
        let task = s.task(id, "token:alice").await.unwrap().unwrap();
        assert_eq!(task.status, TaskStatus::Failed);
        assert_eq!(task.input_requests, None);
        assert!(task.error.unwrap()["message"].as_str().unwrap().contains("restarted"));
    }
    assert_eq!(s.task("a-done", "token:alice").await.unwrap().unwrap().status, TaskStatus::Completed);
    assert_eq!(s.task("b-1", "token:alice").await.unwrap().unwrap().status, TaskStatus::Working);
    }
}

each_backend! {
    async fn bad_tasks_are_refused_before_anything_is_written(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let seq = s.current_seq().await.unwrap();
    let e = s.create_task(task("bad id", "token:alice", "r")).await.unwrap_err();
    assert!(matches!(e, StoreError::InvalidName { kind: NameKind::Task, .. }), "{e:?}");
    for (bad, field) in [
        (NewTask { version: None, ..task("t1", "token:alice", "r") }, "version"),
        (NewTask { source: CallSource::Manifest, ..task("t1", "token:alice", "r") }, "version"),
        (NewTask { source: CallSource::BuiltIn, version: None, ..task("t1", "token:alice", "r") }, "source"),
        (NewTask { tool: String::new(), ..task("t1", "token:alice", "r") }, "tool"),
        (task("t1", "token:alice", ""), "replica"),
        (task("t1", "", "r"), "owner"),
        (NewTask { ttl: Some(Duration::ZERO), ..task("t1", "token:alice", "r") }, "ttl"),
        (NewTask { ttl: Some(Duration::from_secs(u64::MAX)), ..task("t1", "token:alice", "r") }, "ttl"),
    ] {
        let e = s.create_task(bad).await.unwrap_err();
        assert!(matches!(e, StoreError::Invalid { field: ref f, .. } if f == field), "{field}: {e:?}");
    }
    assert_eq!(s.current_seq().await.unwrap(), seq);
    s.create_task(task("t1", "token:alice", "r")).await.unwrap();
    let e = s
        .finish_task("t1", "r", TaskEnd::Failed(object(json!({"message": "no code"}))), None)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid { ref field, .. } if field == "error"), "{e:?}");
    // The schema holds the same rules: a completed row without a result is refused.
    let refused = t
        .exec("UPDATE task SET status = 'completed' WHERE task_id = 't1'")
        .await;
    assert!(refused.is_err(), "{refused:?}");
    // A task without a TTL is kept until purged by hand.
    let forever = NewTask { ttl: None, ..task("t2", "token:alice", "r") };
    let kept = s.create_task(forever).await.unwrap();
    assert_eq!((kept.ttl_ms, kept.expires_at_ms), (None, None));
    }
}

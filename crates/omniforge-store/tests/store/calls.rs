//! The call log: round trips of every outcome, limits, pruning to the configured size.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use omniforge_store::{
    CallLog, CallOutcome, CallRecord, CallSource, MAX_CALL_ERROR_BYTES, StoreConfig, StoreError,
    ToolStore,
};

use crate::util::{Kind, LIVE, TestStore, config, each_backend, spec, who};

/// A call of `tool`@`version` whose fields all derive from `i`.
pub(crate) fn call(tool: &str, version: u32, i: u64) -> CallRecord {
    CallRecord {
        tool: tool.into(),
        source: CallSource::Stored,
        version: Some(version),
        started_at_ms: 1_700_000_000_000 + i as i64,
        duration_ms: 10 + i,
        outcome: CallOutcome::Ok,
        bytes_out: 100 * i,
        principal: Some(format!("token-{i}")),
        error: (i % 2 == 1).then(|| format!("failure {i}")),
        arguments: None,
        arguments_text: None,
        result_text: None,
    }
}

async fn started(store: &dyn CallLog, tool: &str) -> Vec<i64> {
    let calls = store.recent_calls(tool, 100).await.unwrap();
    calls
        .iter()
        .map(|c| c.started_at_ms - 1_700_000_000_000)
        .collect()
}

each_backend! {
    async fn every_outcome_round_trips_newest_first(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    let outcomes = [
        CallOutcome::Ok,
        CallOutcome::Error,
        CallOutcome::Exit(3),
        CallOutcome::Exit(-9),
        CallOutcome::Timeout,
        CallOutcome::Cancelled,
    ];
    let mut written = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let c = CallRecord {
            outcome,
            ..call("t", 1, i as u64)
        };
        s.record_call(c.clone()).await.unwrap();
        written.push(c);
    }
    written.reverse();
    assert_eq!(s.recent_calls("t", 100).await.unwrap(), written);
    assert_eq!(s.recent_calls("t", 2).await.unwrap(), written[..2]);
    assert!(s.recent_calls("t", 0).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn calls_are_kept_to_the_configured_number() {
    let t = TestStore::with(
        Kind::Sqlite,
        StoreConfig {
            call_log_max_rows: 5,
            ..config()
        },
    )
    .await;
    let s = &*t.store;
    s.create_tool(&who(), "a", spec("a"), LIVE).await.unwrap();
    s.create_tool(&who(), "b", spec("b"), LIVE).await.unwrap();
    for i in 0..12 {
        s.record_call(call("a", 1, i)).await.unwrap();
    }
    assert_eq!(started(s, "a").await, [11, 10, 9, 8, 7]);

    // The limit is for the whole log, not per tool: the newest 5 calls of any tool.
    for i in 100..103 {
        s.record_call(call("b", 1, i)).await.unwrap();
    }
    assert_eq!(started(s, "b").await, [102, 101, 100]);
    assert_eq!(started(s, "a").await, [11, 10]);

    // Reopening with a lower limit prunes at the next recorded call.
    s.close().await;
    let lower = omniforge_store::SqliteStore::open_with(
        &t.path,
        &StoreConfig {
            call_log_max_rows: 2,
            ..config()
        },
    )
    .await
    .unwrap();
    assert_eq!(started(&lower, "b").await.len(), 3);
    lower.record_call(call("a", 1, 50)).await.unwrap();
    assert_eq!(started(&lower, "a").await, [50]);
    assert_eq!(started(&lower, "b").await, [102]);
}

each_backend! {
    async fn zero_keeps_no_log(kind) {
    let t = TestStore::with(kind, StoreConfig {
        call_log_max_rows: 0,
        ..config()
    })
    .await;
    t.store
        .create_tool(&who(), "t", spec("1"), LIVE)
        .await
        .unwrap();
    t.store.record_call(call("t", 1, 1)).await.unwrap();
    assert!(t.store.recent_calls("t", 10).await.unwrap().is_empty());
    }
}

each_backend! {
    async fn calls_of_unknown_versions_are_refused(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    assert!(matches!(
        s.record_call(call("t", 2, 1)).await,
        Err(StoreError::NotFound {
            version: Some(2),
            ..
        })
    ));
    assert!(matches!(
        s.record_call(call("ghost", 1, 1)).await,
        Err(StoreError::NotFound {
            version: Some(1),
            ..
        })
    ));
    let too_big = CallRecord {
        bytes_out: u64::MAX,
        ..call("t", 1, 1)
    };
    assert!(matches!(
        s.record_call(too_big).await,
        Err(StoreError::Invalid { .. })
    ));
    assert!(s.recent_calls("t", 10).await.unwrap().is_empty());
    }
}

each_backend! {
    async fn call_log_writes_leave_data_version_alone(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    let before = s.data_version().await.unwrap();
    for i in 0..3 {
        s.record_call(call("t", 1, i)).await.unwrap();
    }
    assert_eq!(s.data_version().await.unwrap(), before);
    }
}

each_backend! {
    async fn history_names_the_caller_and_keeps_errors_short(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    s.add_version(&who(), "t", spec("2"), LIVE).await.unwrap();
    let long = format!("ü{}", "stderr line\n".repeat(1000));
    let failed = CallRecord {
        outcome: CallOutcome::Exit(2),
        principal: Some("alice".into()),
        error: Some(long.clone()),
        ..call("t", 1, 1)
    };
    let anonymous = CallRecord {
        principal: None,
        error: None,
        ..call("t", 2, 2)
    };
    s.record_call(failed.clone()).await.unwrap();
    s.record_call(anonymous.clone()).await.unwrap();
    let history = s.recent_calls("t", 10).await.unwrap();
    assert_eq!(
        history[0], anonymous,
        "newest first, absent fields stay absent"
    );
    let error = history[1].error.as_deref().unwrap();
    assert!(error.len() <= MAX_CALL_ERROR_BYTES && error.len() > MAX_CALL_ERROR_BYTES - 4);
    assert!(long.starts_with(error));
    assert_eq!(
        CallRecord {
            error: failed.error.clone().map(|_| error.to_owned()),
            ..failed
        },
        history[1],
        "time, principal, version, duration and exit as recorded"
    );
    }
}

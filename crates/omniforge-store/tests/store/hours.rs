//! The call log of every tool source (issue 17, metrics of issue 16): built-in and manifest
//! calls beside stored ones, arguments digests and redacted texts, filters and paging, and the
//! hourly statistics that keep 24 h charts whole however small the log is.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omniforge_store::digest::arguments_digest;
use omniforge_store::{
    ArgumentsDigest, CallFilter, CallLog, CallOutcome, CallRecord, CallSource, CapturedText,
    MAX_CALL_TEXT_BYTES, StoreConfig, StoreError, ToolStore as _,
};
use serde_json::json;

use crate::util::{Kind, LIVE, TestStore, config, each_backend, spec, who};

const HOUR: i64 = 3_600_000;

/// The start of the current UTC hour.
fn this_hour() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    now - now.rem_euclid(HOUR)
}

/// A call of `tool` from `source` at `at_ms`, taking `ms`, ending in `outcome`.
fn call_at(
    source: CallSource,
    tool: &str,
    at_ms: i64,
    ms: u64,
    outcome: CallOutcome,
) -> CallRecord {
    CallRecord {
        tool: tool.into(),
        source,
        version: (source == CallSource::Stored).then_some(1),
        started_at_ms: at_ms,
        duration_ms: ms,
        outcome,
        bytes_out: 10,
        principal: Some("token:caller".into()),
        error: outcome.is_error().then(|| "failed".into()),
        arguments: None,
        arguments_text: None,
        result_text: None,
    }
}

each_backend! {
    async fn calls_of_every_source_are_logged(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "weather", spec("w"), LIVE)
        .await
        .unwrap();
    let at = this_hour();
    let builtin = call_at(
        CallSource::BuiltIn,
        "omniforge_create_tool",
        at,
        5,
        CallOutcome::Ok,
    );
    let manifest = CallRecord {
        principal: Some("oauth:https://id.example|42".into()),
        ..call_at(
            CallSource::Manifest,
            "greet.v1.Greeter/Hello",
            at + 1,
            7,
            CallOutcome::Error,
        )
    };
    let stored = call_at(
        CallSource::Stored,
        "weather",
        at + 2,
        9,
        CallOutcome::Exit(2),
    );
    for c in [&builtin, &manifest, &stored] {
        s.record_call(c.clone()).await.unwrap();
    }
    let all = s
        .calls(&CallFilter {
            limit: 10,
            ..CallFilter::default()
        })
        .await
        .unwrap();
    let got: Vec<&CallRecord> = all.iter().map(|c| &c.call).collect();
    assert_eq!(got, [&stored, &manifest, &builtin], "newest first");
    // The stored tool's history has its own call only.
    assert_eq!(
        s.recent_calls("weather", 10).await.unwrap(),
        std::slice::from_ref(&stored)
    );
    // One by id.
    let one = s.call(all[1].id).await.unwrap().unwrap();
    assert_eq!(one.call, manifest);
    assert_eq!(s.call(u64::MAX).await.unwrap(), None);
    // Filters.
    let by = |f: CallFilter| async move {
        s.calls(&CallFilter { limit: 10, ..f })
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.call.tool)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        by(CallFilter {
            source: Some(CallSource::Manifest),
            ..CallFilter::default()
        })
        .await,
        ["greet.v1.Greeter/Hello"]
    );
    assert_eq!(
        by(CallFilter {
            principal: Some("token:caller".into()),
            ..CallFilter::default()
        })
        .await,
        ["weather", "omniforge_create_tool"]
    );
    assert_eq!(
        by(CallFilter {
            tool: Some("weather".into()),
            ..CallFilter::default()
        })
        .await,
        ["weather"]
    );
    assert_eq!(
        by(CallFilter {
            before_id: Some(all[0].id),
            ..CallFilter::default()
        })
        .await,
        ["greet.v1.Greeter/Hello", "omniforge_create_tool"]
    );
    assert!(
        s.calls(&CallFilter::default()).await.unwrap().is_empty(),
        "limit 0"
    );
    // Logging calls is not a change.
    assert_eq!(s.current_seq().await.unwrap(), 1);
    }
}

each_backend! {
    async fn the_version_goes_with_stored_calls_only(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let at = this_hour();
    let mut versioned = call_at(CallSource::BuiltIn, "omniforge_x", at, 1, CallOutcome::Ok);
    versioned.version = Some(1);
    let mut unversioned = call_at(CallSource::Stored, "t", at, 1, CallOutcome::Ok);
    unversioned.version = None;
    let empty = call_at(CallSource::Manifest, "", at, 1, CallOutcome::Ok);
    let long = call_at(
        CallSource::Manifest,
        &"x".repeat(257),
        at,
        1,
        CallOutcome::Ok,
    );
    let mut bad_digest = call_at(CallSource::BuiltIn, "b", at, 1, CallOutcome::Ok);
    bad_digest.arguments = Some(ArgumentsDigest {
        sha256: "not hex".into(),
        bytes: 3,
    });
    for (c, field) in [
        (versioned, "version"),
        (unversioned, "version"),
        (empty, "tool"),
        (long, "tool"),
        (bad_digest, "arguments.sha256"),
    ] {
        let e = s.record_call(c).await.unwrap_err();
        assert!(
            matches!(&e, StoreError::Invalid { field: f, .. } if f == field),
            "{e:?}"
        );
    }
    // A stored tool's call must name an existing version (as before the log took every source).
    let ghost = call_at(CallSource::Stored, "ghost", at, 1, CallOutcome::Ok);
    assert!(matches!(
        s.record_call(ghost).await,
        Err(StoreError::NotFound {
            version: Some(1),
            ..
        })
    ));
    assert!(
        s.calls(&CallFilter {
            limit: 10,
            ..CallFilter::default()
        })
        .await
        .unwrap()
        .is_empty()
    );
    assert!(s.call_activity(0).await.unwrap().is_empty());
    }
}

each_backend! {
    async fn arguments_are_digested_and_texts_kept_redacted_and_cut(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let arguments = json!({"city": "Paris", "days": 3});
    let digest = arguments_digest(&arguments);
    assert_eq!(
        digest,
        arguments_digest(&json!({"days": 3, "city": "Paris"}))
    );
    let long_result = "ü".repeat(MAX_CALL_TEXT_BYTES);
    let call = CallRecord {
        arguments: Some(digest.clone()),
        arguments_text: Some(CapturedText::new(
            r#"{"city":"Paris","token":"[redacted]"}"#,
        )),
        result_text: Some(CapturedText::new(long_result.clone())),
        ..call_at(
            CallSource::BuiltIn,
            "omniforge_get_tool",
            this_hour(),
            3,
            CallOutcome::Ok,
        )
    };
    s.record_call(call.clone()).await.unwrap();
    let got = &s
        .calls(&CallFilter {
            limit: 1,
            ..CallFilter::default()
        })
        .await
        .unwrap()[0]
        .call;
    assert_eq!(got.arguments, Some(digest));
    assert_eq!(got.arguments_text, call.arguments_text);
    assert!(!got.arguments_text.as_ref().unwrap().is_cut());
    let result = got.result_text.as_ref().unwrap();
    assert!(result.is_cut());
    assert_eq!(result.total_bytes, long_result.len() as u64);
    assert!(
        result.text.len() <= MAX_CALL_TEXT_BYTES && result.text.len() > MAX_CALL_TEXT_BYTES - 2
    );
    assert!(long_result.starts_with(&result.text));
    }
}

each_backend! {
    async fn hours_outlive_the_log_and_give_counts_errors_and_percentiles(kind) {
    let t = TestStore::with(kind, StoreConfig {
        call_log_max_rows: 5,
        ..config()
    })
    .await;
    let s = &*t.store;
    s.create_tool(&who(), "slow", spec("s"), LIVE)
        .await
        .unwrap();
    let now = this_hour();
    let earlier = now - HOUR;
    // 100 calls of `slow` this hour, 10 ms to 1000 ms; three failures, one cancellation.
    for i in 1..=100u64 {
        let outcome = match i {
            10 => CallOutcome::Exit(1),
            20 => CallOutcome::Timeout,
            30 => CallOutcome::Error,
            40 => CallOutcome::Cancelled,
            _ => CallOutcome::Ok,
        };
        let c = call_at(CallSource::Stored, "slow", now + i as i64, i * 10, outcome);
        s.record_call(c).await.unwrap();
    }
    // Two built-in calls an hour earlier, and one this hour.
    for (at, ms) in [(earlier, 2), (earlier + 5, 4), (now + 500, 1)] {
        let c = call_at(
            CallSource::BuiltIn,
            "omniforge_instructions",
            at,
            ms,
            CallOutcome::Ok,
        );
        s.record_call(c).await.unwrap();
    }
    // The log kept 5 rows; the hours kept every call.
    assert_eq!(
        s.calls(&CallFilter {
            limit: 1000,
            ..CallFilter::default()
        })
        .await
        .unwrap()
        .len(),
        5
    );
    let slow = s
        .call_hours(Some((CallSource::Stored, "slow")), now - 24 * HOUR)
        .await
        .unwrap();
    assert_eq!(slow.len(), 1);
    let h = slow[0];
    assert_eq!((h.hour_start_ms, h.calls, h.errors), (now, 100, 3));
    // 500 ms (the 50th) is in the (422, 562] bucket, 990 ms in (750, 1000].
    assert_eq!((h.p50_ms, h.p99_ms, h.max_ms), (562, 1000, 1000));
    // A name of another source is another tool.
    assert!(
        s.call_hours(Some((CallSource::BuiltIn, "slow")), 0)
            .await
            .unwrap()
            .is_empty()
    );
    let all = s.call_hours(None, now - 24 * HOUR).await.unwrap();
    let summary: Vec<(i64, u64, u64)> = all
        .iter()
        .map(|h| (h.hour_start_ms, h.calls, h.errors))
        .collect();
    assert_eq!(summary, [(earlier, 2, 0), (now, 101, 3)]);
    assert_eq!((all[0].p50_ms, all[0].p99_ms), (2, 4));
    // Asking from a later time leaves the earlier hour out; any time within an hour counts
    // the whole hour.
    assert_eq!(s.call_hours(None, now + 10).await.unwrap().len(), 1);
    let activity = s.call_activity(now - 24 * HOUR).await.unwrap();
    let rows: Vec<(CallSource, &str, u64, u64, i64)> = activity
        .iter()
        .map(|a| (a.source, a.tool.as_str(), a.calls, a.errors, a.last_call_ms))
        .collect();
    assert_eq!(
        rows,
        [
            (
                CallSource::BuiltIn,
                "omniforge_instructions",
                3,
                0,
                now + 500
            ),
            (CallSource::Stored, "slow", 100, 3, now + 100),
        ]
    );
    // Statistics are not changes either.
    assert_eq!(s.current_seq().await.unwrap(), 1);

    // A purge takes the stored tool's hours along; other sources keep theirs.
    s.purge(&who(), "slow").await.unwrap();
    assert!(
        s.call_hours(Some((CallSource::Stored, "slow")), 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.call_activity(0).await.unwrap().len(), 1);
    }
}

each_backend! {
    async fn hours_are_kept_for_their_max_age_even_without_a_log(kind) {
    let t = TestStore::with(kind, StoreConfig {
        call_log_max_rows: 0,
        call_stats_max_age: Duration::from_secs(2 * 3600),
        ..config()
    })
    .await;
    let s = &*t.store;
    let now = this_hour();
    let ok = |at: i64| call_at(CallSource::BuiltIn, "b", at, 1, CallOutcome::Ok);
    // Written directly in the past, as after a restart: the oldest hours are beyond the age.
    for hours_ago in [0, 1, 5] {
        s.record_call(ok(now - hours_ago * HOUR)).await.unwrap();
    }
    let hours: Vec<i64> = s
        .call_hours(None, 0)
        .await
        .unwrap()
        .iter()
        .map(|h| (now - h.hour_start_ms) / HOUR)
        .collect();
    assert_eq!(hours, [1, 0], "5 hours ago is past the 2-hour age");
    assert!(
        s.calls(&CallFilter {
            limit: 10,
            ..CallFilter::default()
        })
        .await
        .unwrap()
        .is_empty(),
        "no log rows with call_log_max_rows 0"
    );
    }
}

each_backend! {
    /// The call-log writer's group commit: a batch leaves the log and the hours as the same
    /// calls recorded one by one would, leaves out (and returns) the calls it refuses, and
    /// prunes the log once.
    async fn a_batch_records_what_the_same_calls_one_by_one_would(kind) {
    let cfg = || StoreConfig {
        call_log_max_rows: 40,
        ..config()
    };
    let (one, batch) = (TestStore::with(kind, cfg()).await, TestStore::with(kind, cfg()).await);
    for t in [&one, &batch] {
        t.store.create_tool(&who(), "slow", spec("s"), LIVE).await.unwrap();
    }
    let now = this_hour();
    let mut calls = Vec::new();
    for i in 0..60u64 {
        let (source, tool) = match i % 3 {
            0 => (CallSource::Stored, "slow"),
            1 => (CallSource::BuiltIn, "omniforge_instructions"),
            _ => (CallSource::Manifest, "fixture_echo"),
        };
        // Two hours, several tools, some failures.
        let at = if i < 20 { now - HOUR + i as i64 } else { now + i as i64 };
        let outcome = if i % 7 == 0 { CallOutcome::Error } else { CallOutcome::Ok };
        calls.push(call_at(source, tool, at, i * 3, outcome));
    }
    // Refused: a version that does not exist, and an empty tool name.
    let missing = CallRecord { version: Some(9), ..calls[3].clone() };
    let nameless = CallRecord { tool: String::new(), ..calls[4].clone() };
    let mut with_refused = calls.clone();
    with_refused.insert(10, missing.clone());
    with_refused.insert(30, nameless.clone());

    for c in &calls {
        one.store.record_call(c.clone()).await.unwrap();
    }
    assert!(matches!(
        one.store.record_call(missing).await,
        Err(StoreError::NotFound { version: Some(9), .. })
    ));
    assert!(matches!(
        one.store.record_call(nameless).await,
        Err(StoreError::Invalid { .. })
    ));
    let refused = batch.store.record_calls(with_refused).await.unwrap();
    assert!(
        matches!(
            refused.as_slice(),
            [StoreError::Invalid { .. }, StoreError::NotFound { version: Some(9), .. }]
        ),
        "invalid calls are refused before the version lookups: {refused:?}"
    );
    assert!(batch.store.record_calls(Vec::new()).await.unwrap().is_empty());

    let all = CallFilter { limit: 1000, ..CallFilter::default() };
    let logged = |t: &TestStore| {
        let s = t.store.clone();
        let all = all.clone();
        async move {
            s.calls(&all).await.unwrap().into_iter().map(|c| c.call).collect::<Vec<_>>()
        }
    };
    let kept = logged(&batch).await;
    assert_eq!(kept.len(), 40, "pruned to the newest 40");
    assert_eq!(kept, logged(&one).await);
    let mut newest: Vec<CallRecord> = calls[20..].to_vec();
    newest.reverse();
    assert_eq!(kept, newest);
    for tool in [
        None,
        Some((CallSource::Stored, "slow")),
        Some((CallSource::Manifest, "fixture_echo")),
    ] {
        let hours = batch.store.call_hours(tool, now - 24 * HOUR).await.unwrap();
        assert_eq!(hours, one.store.call_hours(tool, now - 24 * HOUR).await.unwrap());
        assert_eq!(hours.len(), 2, "{tool:?}");
    }
    let activity = batch.store.call_activity(now - 24 * HOUR).await.unwrap();
    assert_eq!(activity, one.store.call_activity(now - 24 * HOUR).await.unwrap());
    assert_eq!(activity.iter().map(|a| a.calls).sum::<u64>(), 60);

    // A second batch adds to the hours the first one wrote.
    let again = calls[20..30].to_vec();
    assert!(batch.store.record_calls(again.clone()).await.unwrap().is_empty());
    for c in again {
        one.store.record_call(c).await.unwrap();
    }
    assert_eq!(
        batch.store.call_hours(None, now - 24 * HOUR).await.unwrap(),
        one.store.call_hours(None, now - 24 * HOUR).await.unwrap()
    );
    assert_eq!(logged(&batch).await, logged(&one).await);
    }
}

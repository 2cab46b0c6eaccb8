//! Version status and examples (issue 17): pending, draft and rejected versions, approval,
//! a pending new tool that nobody else sees, the transitions the database allows, examples as
//! part of the immutable definition, and their last results.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use omniforge_store::{
    ChangeKind, ExampleResult, ExampleTrigger, MAX_EXAMPLE_TEXT_BYTES, NewStatus, NewVersion,
    SecretStore as _, StoreError, ToolStore, VersionStatus,
};
use serde_json::json;

use crate::util::{
    Kind, LIVE, TestStore, actor, each_backend, enabled, object, raw, spec, spec_with_secrets, who,
};

fn with_examples(tag: &str, n: usize) -> NewVersion {
    NewVersion {
        examples: (0..n)
            .map(|i| {
                object(
                    json!({"arguments": {"q": format!("{tag}-{i}")}, "expect": {"contains": tag}}),
                )
            })
            .collect(),
        ..spec(tag)
    }
}

fn draft(reason: &str) -> NewStatus {
    NewStatus::Draft {
        reason: reason.into(),
    }
}

each_backend! {
    async fn a_pending_new_tool_is_invisible_until_approved(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "visible", spec("v"), LIVE)
        .await
        .unwrap();
    let writer = actor("token:writer");
    let v1 = s
        .create_tool(&writer, "slugify", spec("s1"), NewStatus::Pending)
        .await
        .unwrap();
    assert_eq!(v1.state.status, VersionStatus::Pending);
    // Not served to anyone: no current version, not listed.
    assert!(s.get("slugify").await.unwrap().is_none());
    assert_eq!(enabled(s).await, ["visible@1"]);
    let tool = s.tool("slugify").await.unwrap().unwrap();
    assert_eq!(tool.current_version, None);
    assert!(tool.enabled);
    // The author and admins find it among the pending versions.
    let mine = s
        .versions_with_status(VersionStatus::Pending, Some("alice"))
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!((mine[0].tool.as_str(), mine[0].number), ("slugify", 1));
    assert!(
        s.versions_with_status(VersionStatus::Pending, Some("bob"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.versions("slugify").await.unwrap(),
        std::slice::from_ref(&v1)
    );
    let names: Vec<String> = s
        .tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["slugify", "visible"]);
    // The name is taken all the same.
    assert!(matches!(
        s.create_tool(&who(), "slugify", spec("other"), LIVE).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    // Rollback to it is refused: only live versions can be current.
    assert!(matches!(
        s.rollback(&who(), "slugify", 1).await,
        Err(StoreError::Conflict { .. })
    ));

    let seen = s.current_seq().await.unwrap();
    let approved = s
        .approve(&actor("token:admin"), "slugify", 1, &[])
        .await
        .unwrap();
    assert_eq!(approved.state.status, VersionStatus::Live);
    assert_eq!(approved.state.decided_by.as_deref(), Some("token:admin"));
    assert!(approved.state.decided_at_ms.is_some());
    assert_eq!(approved.spec, spec("s1"));
    assert_eq!(enabled(s).await, ["slugify@1", "visible@1"]);
    assert_eq!(s.get("slugify").await.unwrap().unwrap().current, approved);
    assert_eq!(
        s.changes_since(seen)
            .await
            .unwrap()
            .keys(ChangeKind::Tool)
            .collect::<Vec<_>>(),
        ["slugify"]
    );
    assert!(
        s.versions_with_status(VersionStatus::Pending, None)
            .await
            .unwrap()
            .is_empty()
    );
    }
}

each_backend! {
    async fn a_pending_update_leaves_the_current_version_serving(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    let seen = s.current_seq().await.unwrap();
    let v2 = s
        .add_version(&who(), "t", spec("2"), NewStatus::Pending)
        .await
        .unwrap();
    assert_eq!(v2.number, 2);
    assert_eq!(s.get("t").await.unwrap().unwrap().current.number, 1);
    assert_eq!(enabled(s).await, ["t@1"]);
    // Other replicas hear of it (the author's view changed).
    assert_eq!(
        s.changes_since(seen)
            .await
            .unwrap()
            .keys(ChangeKind::Tool)
            .collect::<Vec<_>>(),
        ["t"]
    );
    // A draft too is kept without becoming current, with its reason.
    let v3 = s
        .add_version(&who(), "t", spec("3"), draft("example 0: expected 'x'"))
        .await
        .unwrap();
    assert_eq!(v3.state.status, VersionStatus::Draft);
    assert_eq!(v3.state.reason.as_deref(), Some("example 0: expected 'x'"));
    assert_eq!(s.get("t").await.unwrap().unwrap().current.number, 1);
    // Approving v2 makes it current; a draft cannot be approved, only rejected.
    s.approve(&who(), "t", 2, &[]).await.unwrap();
    assert_eq!(s.get("t").await.unwrap().unwrap().current.number, 2);
    assert!(matches!(
        s.approve(&who(), "t", 3, &[]).await,
        Err(StoreError::Conflict { .. })
    ));
    let rejected = s
        .reject(&actor("token:admin"), "t", 3, "fails its examples")
        .await
        .unwrap();
    assert_eq!(rejected.state.status, VersionStatus::Rejected);
    assert_eq!(rejected.state.reason.as_deref(), Some("fails its examples"));
    assert_eq!(rejected.state.decided_by.as_deref(), Some("token:admin"));
    // Nothing leaves live or rejected.
    for (n, what) in [(2, "live"), (3, "rejected")] {
        let e = s.reject(&who(), "t", n, "again").await.unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
        assert!(matches!(
            s.approve(&who(), "t", n, &[]).await,
            Err(StoreError::Conflict { .. })
        ));
    }
    assert!(matches!(
        s.rollback(&who(), "t", 3).await,
        Err(StoreError::Conflict { .. })
    ));
    // The history is whole, each version with its status.
    let statuses: Vec<VersionStatus> = s
        .versions("t")
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.state.status)
        .collect();
    assert_eq!(
        statuses,
        [
            VersionStatus::Live,
            VersionStatus::Live,
            VersionStatus::Rejected
        ]
    );
    assert!(matches!(
        s.approve(&who(), "t", 9, &[]).await,
        Err(StoreError::NotFound {
            version: Some(9),
            ..
        })
    ));
    }
}

each_backend! {
    async fn a_newer_pending_version_supersedes_the_same_authors_older_one(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    let mut by_alice = spec("2");
    by_alice.author = "alice".into();
    let mut by_bob = spec("3");
    by_bob.author = "bob".into();
    s.add_version(&actor("token:alice"), "t", by_alice, NewStatus::Pending)
        .await
        .unwrap();
    s.add_version(&actor("token:bob"), "t", by_bob, NewStatus::Pending)
        .await
        .unwrap();
    let mut again = spec("4");
    again.author = "alice".into();
    s.add_version(&actor("token:alice"), "t", again, NewStatus::Pending)
        .await
        .unwrap();
    let v2 = s.version("t", 2).await.unwrap();
    assert_eq!(v2.state.status, VersionStatus::Rejected);
    assert_eq!(v2.state.reason.as_deref(), Some("superseded by version 4"));
    assert_eq!(v2.state.decided_by.as_deref(), Some("token:alice"));
    let pending: Vec<u32> = s
        .versions_with_status(VersionStatus::Pending, None)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.number)
        .collect();
    assert_eq!(pending, [3, 4], "bob's version stays pending");
    }
}

each_backend! {
    async fn approval_grants_only_the_ticked_secrets(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.set_secret(&who(), "A", "a").await.unwrap();
    s.set_secret(&who(), "B", "b").await.unwrap();
    s.create_tool(
        &who(),
        "t",
        spec_with_secrets("1", &["A", "B"]),
        NewStatus::Pending,
    )
    .await
    .unwrap();
    // An undeclared or unset secret fails the whole approval.
    s.set_secret(&who(), "C", "c").await.unwrap();
    assert!(matches!(
        s.approve(&who(), "t", 1, &["A".into(), "C".into()]).await,
        Err(StoreError::Invalid { .. })
    ));
    assert!(s.get("t").await.unwrap().is_none(), "nothing was approved");
    assert!(s.grants(None, None).await.unwrap().is_empty());
    let seen = s.current_seq().await.unwrap();
    s.approve(&who(), "t", 1, &["A".into(), "A".into()])
        .await
        .unwrap();
    let granted = s.granted_secrets("t", 1).await.unwrap();
    assert_eq!(granted.len(), 1);
    assert_eq!(granted["A"].expose(), "a");
    let requests = s.secret_requests("t", 1).await.unwrap();
    assert!(requests[0].grant.is_some() && requests[1].grant.is_none());
    let set = s.changes_since(seen).await.unwrap();
    assert_eq!(set.keys(ChangeKind::Tool).collect::<Vec<_>>(), ["t"]);
    assert_eq!(set.keys(ChangeKind::Grant).collect::<Vec<_>>(), ["t"]);
    }
}

/// The error SQLite gives for `q`, which must fail.
async fn refused(pool: &sqlx::SqlitePool, q: &'static str) -> String {
    sqlx::query(q).execute(pool).await.unwrap_err().to_string()
}

#[tokio::test]
async fn the_database_allows_only_status_transitions_and_a_live_current_version() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    s.add_version(&who(), "t", spec("2"), NewStatus::Pending)
        .await
        .unwrap();
    let pool = raw(&t.path).await;

    // Content stays immutable, also together with a status change.
    let e = refused(
        &pool,
        "UPDATE tool_version SET examples = '[]' WHERE number = 1",
    )
    .await;
    assert!(e.contains("immutable"), "{e}");
    let e = refused(
        &pool,
        "UPDATE tool_version SET code = 'x', status = 'live', status_by = 'a', status_at_ms = 1 \
         WHERE number = 2",
    )
    .await;
    assert!(e.contains("immutable"), "{e}");
    // live -> pending, a change without who and when, pending -> draft: refused.
    for q in [
        "UPDATE tool_version SET status = 'pending', status_by = 'a', status_at_ms = 1 WHERE number = 1",
        "UPDATE tool_version SET status = 'live' WHERE number = 2",
        "UPDATE tool_version SET status = 'draft', status_by = 'a', status_at_ms = 1 WHERE number = 2",
        "UPDATE tool_version SET status_reason = 'edited' WHERE number = 1",
    ] {
        let e = refused(&pool, q).await;
        assert!(e.contains("status only goes"), "{q}: {e}");
    }
    // The current pointer cannot name a pending version, nor a tool start with one.
    let e = refused(
        &pool,
        "UPDATE tool SET current_version = 2 WHERE name = 't'",
    )
    .await;
    assert!(e.contains("must be a live version"), "{e}");
    let e = refused(&pool,
        "INSERT INTO tool (name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq) \
         VALUES ('u', 1, 1, 0, 0, 0)",
    )
    .await;
    assert!(e.contains("without a current version"), "{e}");
    // The allowed transition goes through.
    sqlx::query(
        "UPDATE tool_version SET status = 'rejected', status_by = 'a', status_at_ms = 1 WHERE number = 2",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(
        s.version("t", 2).await.unwrap().state.status,
        VersionStatus::Rejected
    );
}

#[tokio::test]
async fn examples_are_part_of_the_definition_and_their_results_are_replaced_per_run() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    let v1 = s
        .create_tool(&who(), "t", with_examples("a", 2), LIVE)
        .await
        .unwrap();
    assert_eq!(
        s.version("t", 1).await.unwrap().spec.examples,
        v1.spec.examples
    );
    assert_eq!(v1.spec.examples.len(), 2);
    assert!(s.example_results("t", 1).await.unwrap().is_empty());

    let result = |index: u32, passed: bool, trigger: ExampleTrigger| ExampleResult {
        index,
        passed,
        actual: format!("actual {index}"),
        failure: (!passed).then(|| "expected a".into()),
        trigger,
        ran_by: "token:writer".into(),
        ran_at_ms: 1_700_000_000_000 + i64::from(index),
    };
    let first = vec![
        result(1, false, ExampleTrigger::Create),
        result(0, true, ExampleTrigger::Create),
    ];
    let seen = s.current_seq().await.unwrap();
    s.record_example_results("t", 1, first.clone())
        .await
        .unwrap();
    let mut sorted = first;
    sorted.sort_by_key(|r| r.index);
    assert_eq!(s.example_results("t", 1).await.unwrap(), sorted);
    assert_eq!(
        s.current_seq().await.unwrap(),
        seen,
        "results are not changes"
    );
    // A later run replaces the results whole.
    let second = vec![result(0, true, ExampleTrigger::Check)];
    s.record_example_results("t", 1, second.clone())
        .await
        .unwrap();
    assert_eq!(s.example_results("t", 1).await.unwrap(), second);
    // Long texts are cut; bad indexes refused, and nothing is replaced.
    let mut long = result(1, false, ExampleTrigger::Check);
    long.actual = "é".repeat(MAX_EXAMPLE_TEXT_BYTES);
    long.failure = Some("x".repeat(10_000));
    s.record_example_results("t", 1, vec![long]).await.unwrap();
    let stored = &s.example_results("t", 1).await.unwrap()[0];
    assert!(
        stored.actual.len() <= MAX_EXAMPLE_TEXT_BYTES && stored.actual.chars().all(|c| c == 'é')
    );
    assert_eq!(
        stored.failure.as_ref().unwrap().len(),
        MAX_EXAMPLE_TEXT_BYTES
    );
    for bad in [
        vec![result(2, true, ExampleTrigger::Check)],
        vec![
            result(0, true, ExampleTrigger::Check),
            result(0, true, ExampleTrigger::Check),
        ],
    ] {
        assert!(matches!(
            s.record_example_results("t", 1, bad).await,
            Err(StoreError::Invalid { .. })
        ));
    }
    assert_eq!(s.example_results("t", 1).await.unwrap().len(), 1);
    assert!(matches!(
        s.record_example_results("t", 5, vec![]).await,
        Err(StoreError::NotFound {
            version: Some(5),
            ..
        })
    ));
    assert!(matches!(
        s.example_results("t", 5).await,
        Err(StoreError::NotFound {
            version: Some(5),
            ..
        })
    ));
    // A version with other examples is another definition: the import sees a change.
    let report = omniforge_store::ContentStore::import(
        s,
        &who(),
        omniforge_store::ImportBatch {
            tools: vec![("t".into(), with_examples("a", 3))],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.changed, ["tool t: version 2"]);
    // Purge takes the results with it.
    s.purge(&who(), "t").await.unwrap();
    let pool = raw(&t.path).await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM example_result")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0);
    pool.close().await;
}

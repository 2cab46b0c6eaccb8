//! The audit log (issue 11): one record per authoring or admin action, with the right
//! principal, written in the action's own transaction (a failing write leaves no record, a
//! record that cannot be written fails the write), append-only, queried by time, principal and
//! object, pruned only through its retention API.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use omniforge_store::digest::{prompt_sha256, resource_sha256, version_sha256};
use omniforge_store::{
    Actor, AuditAction, AuditFilter, AuditLog, AuditObject, AuditRecord, ContentStore as _,
    ImportBatch, NewPrompt, NewResource, NewStatus, ResourceBody, SecretStore as _, StoreError,
    ToolStore, WriteMode,
};
use serde_json::json;

use crate::util::{Kind, LIVE, TestStore, actor, each_backend, raw, spec, spec_with_secrets, who};

fn all() -> AuditFilter {
    AuditFilter {
        limit: 1000,
        ..AuditFilter::default()
    }
}

/// Every record, oldest first, as `(principal, action, object, name, version)`.
async fn log(s: &dyn AuditLog) -> Vec<(String, AuditAction, AuditObject, String, Option<u32>)> {
    let mut records = s.audit(&all()).await.unwrap();
    records.reverse();
    records
        .into_iter()
        .map(|r| (r.principal, r.action, r.object, r.name, r.version))
        .collect()
}

/// The records written by `op`, oldest first.
async fn records_of(s: &crate::util::TestStore, op: impl AsyncFnOnce()) -> Vec<AuditRecord> {
    let newest = s
        .store
        .audit(&AuditFilter { limit: 1, ..all() })
        .await
        .unwrap();
    let after = newest.first().map_or(0, |r| r.id);
    op().await;
    let mut records: Vec<AuditRecord> = s
        .store
        .audit(&all())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.id > after)
        .collect();
    records.reverse();
    records
}

fn resource(uri: &str, text: &str) -> NewResource {
    NewResource {
        uri: uri.into(),
        name: "r".into(),
        title: None,
        description: None,
        mime_type: None,
        body: ResourceBody::Text(text.into()),
    }
}

fn prompt(name: &str) -> NewPrompt {
    NewPrompt {
        name: name.into(),
        title: None,
        description: None,
        arguments: vec![],
        messages: vec![json!({"role": "user", "content": {"type": "text", "text": "hi"}})],
        script: None,
        completion_script: None,
    }
}

use AuditAction as A;
use AuditObject as O;

each_backend! {
    async fn every_action_is_recorded_with_its_principal(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let alice = actor("token:alice");
    let admin = actor("token:admin").with("via", "console");
    let cli = actor("cli:root");

    s.create_tool(&alice, "t", spec_with_secrets("1", &["API_KEY"]), LIVE)
        .await
        .unwrap();
    s.add_version(&alice, "t", spec_with_secrets("2", &["API_KEY"]), LIVE)
        .await
        .unwrap();
    s.rollback(&cli, "t", 1).await.unwrap();
    s.set_enabled(&cli, "t", false).await.unwrap();
    s.set_enabled(&cli, "t", true).await.unwrap();
    s.set_secret(&admin, "API_KEY", "hunter2").await.unwrap();
    s.grant_secret(&admin, "API_KEY", "t", 1).await.unwrap();
    s.revoke_secret(&admin, "API_KEY", "t", 1).await.unwrap();
    s.add_version(
        &alice,
        "t",
        spec_with_secrets("3", &["API_KEY"]),
        NewStatus::Pending,
    )
    .await
    .unwrap();
    s.approve(&admin, "t", 3, &["API_KEY".into()])
        .await
        .unwrap();
    s.add_version(&alice, "t", spec("4"), NewStatus::Pending)
        .await
        .unwrap();
    s.reject(&admin, "t", 4, "no network for this")
        .await
        .unwrap();
    s.put_resource(&alice, resource("test://r", "a"), WriteMode::Create)
        .await
        .unwrap();
    s.put_resource(&alice, resource("test://r", "b"), WriteMode::Update)
        .await
        .unwrap();
    s.delete_resource(&alice, "test://r").await.unwrap();
    s.put_prompt(&alice, prompt("p"), WriteMode::Create)
        .await
        .unwrap();
    s.delete_prompt(&alice, "p").await.unwrap();
    s.delete_secret(&admin, "API_KEY").await.unwrap();
    s.import(
        &cli,
        ImportBatch {
            tools: vec![("packed".into(), spec("p"))],
            ..ImportBatch::default()
        },
    )
    .await
    .unwrap();
    s.rotate_key(&admin).await.unwrap();
    s.purge(&cli, "t").await.unwrap();

    let s_ = |p: &str| p.to_owned();
    let n = |p: &str| p.to_owned();
    assert_eq!(
        log(s).await,
        [
            (s_("token:alice"), A::Create, O::Tool, n("t"), Some(1)),
            (s_("token:alice"), A::Update, O::Tool, n("t"), Some(2)),
            (s_("cli:root"), A::Rollback, O::Tool, n("t"), Some(1)),
            (s_("cli:root"), A::Disable, O::Tool, n("t"), Some(1)),
            (s_("cli:root"), A::Enable, O::Tool, n("t"), Some(1)),
            (s_("token:admin"), A::Set, O::Secret, n("API_KEY"), None),
            (s_("token:admin"), A::Grant, O::Tool, n("t"), Some(1)),
            (s_("token:admin"), A::Revoke, O::Tool, n("t"), Some(1)),
            (s_("token:alice"), A::Update, O::Tool, n("t"), Some(3)),
            (s_("token:admin"), A::Approve, O::Tool, n("t"), Some(3)),
            (s_("token:admin"), A::Grant, O::Tool, n("t"), Some(3)),
            (s_("token:alice"), A::Update, O::Tool, n("t"), Some(4)),
            (s_("token:admin"), A::Reject, O::Tool, n("t"), Some(4)),
            (
                s_("token:alice"),
                A::Create,
                O::Resource,
                n("test://r"),
                None
            ),
            (
                s_("token:alice"),
                A::Update,
                O::Resource,
                n("test://r"),
                None
            ),
            (
                s_("token:alice"),
                A::Delete,
                O::Resource,
                n("test://r"),
                None
            ),
            (s_("token:alice"), A::Create, O::Prompt, n("p"), None),
            (s_("token:alice"), A::Delete, O::Prompt, n("p"), None),
            (s_("token:admin"), A::Delete, O::Secret, n("API_KEY"), None),
            (s_("cli:root"), A::Create, O::Tool, n("packed"), Some(1)),
            (s_("cli:root"), A::Import, O::Pack, n("pack"), None),
            (
                s_("token:admin"),
                A::RotateKey,
                O::Keyring,
                n("test-key-1"),
                None
            ),
            (s_("cli:root"), A::Delete, O::Tool, n("t"), None),
        ]
    );
    // No record anywhere holds the secret's value.
    let everything = format!("{:?}", s.audit(&all()).await.unwrap());
    assert!(!everything.contains("hunter2"));
    }
}

each_backend! {
    async fn records_carry_the_definition_hash_and_details(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let records = records_of(&t, async || {
        s.create_tool(
            &actor("token:a").with("via", "console"),
            "t",
            spec("1"),
            LIVE,
        )
        .await
        .unwrap();
    })
    .await;
    let create = &records[0];
    assert_eq!(
        create.definition_sha256.as_deref(),
        Some(version_sha256(&spec("1")).as_str())
    );
    assert_eq!(
        create.detail,
        *json!({"via": "console", "status": "live"})
            .as_object()
            .unwrap()
    );
    assert!(create.at_ms > 1_600_000_000_000);

    // The same code from another author hashes the same; other code does not.
    let mut other_author = spec("1");
    other_author.author = "bob".into();
    assert_eq!(version_sha256(&other_author), version_sha256(&spec("1")));
    assert_ne!(version_sha256(&spec("2")), version_sha256(&spec("1")));

    s.add_version(&who(), "t", spec("2"), LIVE).await.unwrap();
    let records = records_of(&t, async || {
        s.rollback(&who(), "t", 1).await.unwrap();
    })
    .await;
    assert_eq!(
        records[0].definition_sha256,
        Some(version_sha256(&spec("1")))
    );
    assert_eq!(records[0].detail["from"], json!(2));

    let records = records_of(&t, async || {
        s.put_resource(&who(), resource("test://x", "body"), WriteMode::Create)
            .await
            .unwrap();
        s.put_prompt(&who(), prompt("q"), WriteMode::Create)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(
        records[0].definition_sha256,
        Some(resource_sha256(&resource("test://x", "body")))
    );
    assert_eq!(
        records[1].definition_sha256,
        Some(prompt_sha256(&prompt("q")))
    );

    // An import that changes nothing still records the import, and nothing else.
    let batch = ImportBatch {
        resources: vec![resource("test://x", "body")],
        ..ImportBatch::default()
    };
    let records = records_of(&t, async || {
        s.import(&who(), batch).await.unwrap();
    })
    .await;
    assert_eq!(records.len(), 1);
    assert_eq!((records[0].action, records[0].object), (A::Import, O::Pack));
    assert_eq!(records[0].detail["unchanged"], json!(1));
    assert_eq!(records[0].detail["changed"], json!([]));
    // A write that changes nothing records nothing.
    let records = records_of(&t, async || {
        assert!(
            !s.put_resource(&who(), resource("test://x", "body"), WriteMode::Upsert)
                .await
                .unwrap()
        );
    })
    .await;
    assert!(records.is_empty());
    }
}

each_backend! {
    async fn a_failing_write_leaves_no_record(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    let before = log(s).await;
    s.create_tool(&who(), "t", spec("again"), LIVE)
        .await
        .unwrap_err();
    s.add_version(&who(), "ghost", spec("x"), LIVE)
        .await
        .unwrap_err();
    s.rollback(&who(), "t", 7).await.unwrap_err();
    s.set_enabled(&who(), "ghost", true).await.unwrap_err();
    s.purge(&who(), "ghost").await.unwrap_err();
    s.delete_secret(&who(), "GHOST").await.unwrap_err();
    s.delete_prompt(&who(), "ghost").await.unwrap_err();
    s.approve(&who(), "t", 1, &[]).await.unwrap_err();
    s.reject(&who(), "t", 1, "live versions cannot be rejected")
        .await
        .unwrap_err();
    // A bad actor is refused before anything happens.
    let e = s
        .create_tool(&Actor::new(""), "u", spec("u"), LIVE)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Invalid { field, .. } if field == "actor.principal"),
        "{e:?}"
    );
    assert!(s.get("u").await.unwrap().is_none());
    assert_eq!(log(s).await, before);
    }
}

#[tokio::test]
async fn a_record_that_cannot_be_written_fails_its_write() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.set_secret(&who(), "KEPT", "old").await.unwrap();
    let seq = s.current_seq().await.unwrap();
    // Make every audit insert fail, as a full disk or a broken table would.
    let pool = raw(&t.path).await;
    sqlx::query(
        "CREATE TRIGGER audit_refuses BEFORE INSERT ON audit_log \
         BEGIN SELECT RAISE(ABORT, 'audit unavailable'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let e = s
        .create_tool(&who(), "t", spec("1"), LIVE)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("audit unavailable"), "{e}");
    assert!(
        s.get("t").await.unwrap().is_none(),
        "the tool was not created"
    );
    s.set_secret(&who(), "KEPT", "new").await.unwrap_err();
    let kept = s.secret_values(&["KEPT".into()]).await.unwrap();
    assert_eq!(kept["KEPT"].expose(), "old", "the secret kept its value");
    s.put_resource(&who(), resource("test://r", "x"), WriteMode::Create)
        .await
        .unwrap_err();
    assert!(s.get_resource("test://r").await.unwrap().is_none());
    assert_eq!(
        s.current_seq().await.unwrap(),
        seq,
        "no change was committed"
    );
    sqlx::query("DROP TRIGGER audit_refuses")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
}

#[tokio::test]
async fn the_log_is_append_only_but_for_its_retention_prune() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    let pool = raw(&t.path).await;
    let e = sqlx::query("UPDATE audit_log SET principal = 'someone else'")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("append-only"), "{e}");
    let e = sqlx::query("DELETE FROM audit_log")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("append-only"), "{e}");
    // The retention cut cannot be moved back by hand either.
    sqlx::query("UPDATE meta SET value = 5 WHERE key = 'audit_pruned_before_ms'")
        .execute(&pool)
        .await
        .unwrap();
    let e = sqlx::query("UPDATE meta SET value = 4 WHERE key = 'audit_pruned_before_ms'")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("only moves forward"), "{e}");
    pool.close().await;
    assert_eq!(log(s).await.len(), 1);

    // The prune removes what is older than its cut, records itself, and keeps the rest.
    let first = s.audit(&all()).await.unwrap()[0].clone();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let cut = first.at_ms + 1;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    s.set_enabled(&who(), "t", false).await.unwrap();
    assert_eq!(s.prune_audit(&actor("token:admin"), cut).await.unwrap(), 1);
    let left = log(s).await;
    assert_eq!(left.len(), 2, "{left:?}");
    assert_eq!(left[0].1, A::Disable);
    assert_eq!((left[1].1, left[1].2), (A::Prune, O::AuditLog));
    let prune = &s.audit(&all()).await.unwrap()[0];
    assert_eq!(prune.detail["removed"], json!(1));
    // Ids keep growing after a prune.
    assert!(prune.id > first.id + 1);
    // A cut below the current one deletes nothing more.
    assert_eq!(s.prune_audit(&who(), 0).await.unwrap(), 0);
}

each_backend! {
    async fn queries_by_time_principal_object_and_page(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    for i in 0..5 {
        let who = actor(if i % 2 == 0 {
            "token:even"
        } else {
            "token:odd"
        });
        s.create_tool(&who, &format!("t{i}"), spec(&i.to_string()), LIVE)
            .await
            .unwrap();
    }
    let mid = s.audit(&all()).await.unwrap()[2].clone();
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let later = omniforge_store::ToolStore::get(s, "t0")
        .await
        .unwrap()
        .unwrap()
        .tool
        .created_at_ms;
    let by = |p: &str| AuditFilter {
        principal: Some(p.into()),
        ..all()
    };
    let names = |r: Vec<AuditRecord>| r.into_iter().map(|r| r.name).collect::<Vec<_>>();
    assert_eq!(
        names(s.audit(&by("token:even")).await.unwrap()),
        ["t4", "t2", "t0"]
    );
    assert_eq!(
        names(s.audit(&by("token:odd")).await.unwrap()),
        ["t3", "t1"]
    );
    let object = AuditFilter {
        object: Some((O::Tool, "t3".into())),
        ..all()
    };
    assert_eq!(names(s.audit(&object).await.unwrap()), ["t3"]);
    let wrong_kind = AuditFilter {
        object: Some((O::Prompt, "t3".into())),
        ..all()
    };
    assert!(s.audit(&wrong_kind).await.unwrap().is_empty());
    // Newest first, a page at a time.
    let page = AuditFilter { limit: 2, ..all() };
    let first = s.audit(&page).await.unwrap();
    assert_eq!(names(first.clone()), ["t4", "t3"]);
    let next = AuditFilter {
        before_id: Some(first[1].id),
        ..page
    };
    assert_eq!(names(s.audit(&next).await.unwrap()), ["t2", "t1"]);
    assert!(
        s.audit(&AuditFilter::default()).await.unwrap().is_empty(),
        "limit 0"
    );
    // Since a time: everything at or after it.
    let since = AuditFilter {
        since_ms: Some(mid.at_ms),
        ..all()
    };
    assert!(names(s.audit(&since).await.unwrap()).contains(&"t2".to_owned()));
    let future = AuditFilter {
        since_ms: Some(later + 60_000),
        ..all()
    };
    assert!(s.audit(&future).await.unwrap().is_empty());
    }
}

each_backend! {
    async fn writes_that_are_not_actions_leave_the_log_alone(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    let before = log(s).await;
    use omniforge_store::CallLog as _;
    s.record_call(crate::calls::call("t", 1, 1)).await.unwrap();
    s.list_enabled().await.unwrap();
    s.secret_names().await.unwrap();
    s.audit(&all()).await.unwrap();
    assert_eq!(log(s).await, before);
    }
}

each_backend! {
    /// Retention: a prune removes the records before its cut and records itself (the cut, the
    /// rows removed); the same prune again removes nothing and records nothing; prunes of two
    /// instances at once (two replicas) take turns: the rows go once, with one record.
    multi_thread async fn prunes_record_themselves_once_and_take_turns(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    for n in 0..3 {
        s.create_tool(&who(), &format!("t{n}"), spec("1"), LIVE).await.unwrap();
    }
    let old = s.audit(&all()).await.unwrap();
    assert_eq!(old.len(), 3);
    let cut = old[0].at_ms + 1;
    let admin = actor("token:admin");
    assert_eq!(s.prune_audit(&admin, cut).await.unwrap(), 3);
    let after = s.audit(&all()).await.unwrap();
    assert_eq!(after.len(), 1, "{after:?}");
    let prune = &after[0];
    assert_eq!((prune.action, prune.object), (AuditAction::Prune, AuditObject::AuditLog));
    assert_eq!(prune.principal, "token:admin");
    assert_eq!(prune.detail["before_ms"], json!(cut));
    assert_eq!(prune.detail["removed"], json!(3));
    // Idempotent: nothing older than the cut is left, so nothing changes.
    assert_eq!(s.prune_audit(&admin, cut).await.unwrap(), 0);
    assert_eq!(s.audit(&all()).await.unwrap().len(), 1);

    // Two replicas prune at once, past every record so far.
    for n in 3..8 {
        s.create_tool(&who(), &format!("t{n}"), spec("1"), LIVE).await.unwrap();
    }
    let newest = s.audit(&all()).await.unwrap()[0].at_ms;
    let other = t.second().await;
    let (a, b) = tokio::join!(
        s.prune_audit(&admin, newest + 1),
        other.prune_audit(&admin, newest + 1)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a + b, 6, "the 5 creates and the first prune's record, once: {a} + {b}");
    assert_eq!(a.min(b), 0);
    let left = s.audit(&all()).await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].detail["removed"], json!(6));
    other.close().await;
    }
}

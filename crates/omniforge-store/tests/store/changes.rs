//! The change feed: which keys each write reports, one entry per key, writes of other instances
//! and processes, pruning into reload flags, a database behind its reader, the wake-up, and a
//! database migrated from before the feed existed.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::time::Duration;

use omniforge_store::{CallLog as _, SecretStore as _};
use omniforge_store::{
    Change, ChangeKind, ChangeSet, ContentStore, Engine, ImportBatch, NewPrompt, NewResource,
    ResourceBody, SqliteStore, StoreConfig, ToolStore, WriteMode,
};
use serde_json::json;

use crate::calls::call;
use crate::util::{Kind, LIVE, TestStore, config, each_backend, spec, who};

/// `(kind, key)` of each change, in order.
fn keys(set: &ChangeSet) -> Vec<(ChangeKind, &str)> {
    set.changes
        .iter()
        .map(|c| (c.kind, c.key.as_str()))
        .collect()
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

fn prompt(name: &str, text: &str) -> NewPrompt {
    NewPrompt {
        name: name.into(),
        title: None,
        description: None,
        arguments: vec![],
        messages: vec![json!({"role": "user", "content": {"type": "text", "text": text}})],
        script: None,
        completion_script: None,
    }
}

/// What one operation adds to the feed, read from the seq before it.
async fn after(s: &Engine, op: impl AsyncFnOnce(&Engine)) -> (u64, ChangeSet) {
    let before = s.current_seq().await.unwrap();
    op(s).await;
    (before, s.changes_since(before).await.unwrap())
}

each_backend! {
    async fn a_write_of_one_tool_yields_exactly_that_name(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    assert_eq!(s.current_seq().await.unwrap(), 0);
    assert_eq!(s.changes_since(0).await.unwrap(), ChangeSet::default());
    for name in ["a", "b", "c"] {
        s.create_tool(&who(), name, spec(name), LIVE).await.unwrap();
    }
    let (before, set) = after(s, async |s| {
        s.add_version(&who(), "b", spec("b2"), LIVE).await.unwrap();
    })
    .await;
    assert_eq!(set.seq, before + 1);
    assert!(set.reload.is_empty());
    let change = &set.changes[..];
    assert_eq!(change.len(), 1, "{set:?}");
    assert_eq!(
        (change[0].kind, change[0].key.as_str()),
        (ChangeKind::Tool, "b")
    );
    assert_eq!(change[0].seq, before + 1);
    assert!(change[0].at_ms > 1_600_000_000_000, "{:?}", change[0]);
    // The high-water mark agrees with the counter the old API reads.
    assert_eq!(
        s.current_seq().await.unwrap(),
        u64::try_from(s.data_version().await.unwrap()).unwrap()
    );
    // And the whole history from the start, oldest first.
    let all = s.changes_since(0).await.unwrap();
    assert_eq!(
        keys(&all),
        [
            (ChangeKind::Tool, "a"),
            (ChangeKind::Tool, "c"),
            (ChangeKind::Tool, "b"),
        ],
        "one entry per key, at its newest change"
    );
    assert_eq!(
        all.changes.iter().map(|c| c.seq).collect::<Vec<_>>(),
        [1, 3, 4]
    );
    }
}

each_backend! {
    async fn every_kind_of_write_reports_its_key_and_nothing_else(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
    s.add_version(&who(), "t", spec("2"), LIVE).await.unwrap();
    let tool = [(ChangeKind::Tool, "t")];
    let (_, set) = after(s, async |s| {
        s.rollback(&who(), "t", 1).await.unwrap();
    })
    .await;
    assert_eq!(keys(&set), tool, "rollback");
    let (_, set) = after(s, async |s| {
        s.set_enabled(&who(), "t", false).await.unwrap()
    })
    .await;
    assert_eq!(keys(&set), tool, "disable");
    let (_, set) = after(s, async |s| s.set_enabled(&who(), "t", true).await.unwrap()).await;
    assert_eq!(keys(&set), tool, "enable");

    let secret = [(ChangeKind::Secret, "API_TOKEN")];
    let (_, set) = after(s, async |s| {
        s.set_secret(&who(), "API_TOKEN", "v1").await.unwrap()
    })
    .await;
    assert_eq!(keys(&set), secret, "set secret");
    assert!(
        !format!("{set:?}").contains("v1"),
        "the feed never carries a value"
    );
    let (_, set) = after(s, async |s| {
        s.delete_secret(&who(), "API_TOKEN").await.unwrap()
    })
    .await;
    assert_eq!(keys(&set), secret, "delete secret");

    let (_, set) = after(s, async |s| {
        s.put_resource(&who(), resource("test://r", "x"), WriteMode::Create)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(keys(&set), [(ChangeKind::Resource, "test://r")]);
    let (_, set) = after(s, async |s| {
        s.put_prompt(&who(), prompt("p", "x"), WriteMode::Create)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(keys(&set), [(ChangeKind::Prompt, "p")]);
    let (_, set) = after(s, async |s| {
        s.delete_resource(&who(), "test://r").await.unwrap();
        s.delete_prompt(&who(), "p").await.unwrap();
    })
    .await;
    assert_eq!(
        keys(&set),
        [
            (ChangeKind::Resource, "test://r"),
            (ChangeKind::Prompt, "p")
        ]
    );

    // A pack import: one change per entry that changed, each under its kind.
    let batch = ImportBatch {
        tools: vec![("t".into(), spec("3")), ("u".into(), spec("u"))],
        resources: vec![resource("test://r2", "y")],
        templates: vec![],
        prompts: vec![prompt("p2", "y")],
    };
    let (_, set) = after(s, async |s| {
        s.import(&who(), batch.clone()).await.unwrap();
    })
    .await;
    assert_eq!(
        keys(&set),
        [
            (ChangeKind::Tool, "t"),
            (ChangeKind::Tool, "u"),
            (ChangeKind::Resource, "test://r2"),
            (ChangeKind::Prompt, "p2"),
        ]
    );

    // Writes that change nothing, reads, call log writes and failed writes are no changes.
    let (before, set) = after(s, async |s| {
        s.import(&who(), batch.clone()).await.unwrap();
        assert!(
            !s.put_prompt(&who(), prompt("p2", "y"), WriteMode::Upsert)
                .await
                .unwrap()
        );
        s.record_call(call("t", 1, 1)).await.unwrap();
        s.list_enabled().await.unwrap();
        s.create_tool(&who(), "t", spec("again"), LIVE)
            .await
            .unwrap_err();
        s.set_enabled(&who(), "ghost", true).await.unwrap_err();
        s.delete_secret(&who(), "GHOST").await.unwrap_err();
        s.delete_resource(&who(), "test://ghost").await.unwrap_err();
    })
    .await;
    assert_eq!(
        set,
        ChangeSet {
            seq: before,
            ..ChangeSet::default()
        }
    );

    // A purge, last.
    let (_, set) = after(s, async |s| s.purge(&who(), "t").await.unwrap()).await;
    assert_eq!(keys(&set), tool, "purge");
    assert!(s.get("t").await.unwrap().is_none());
    }
}

each_backend! {
    async fn rows_carry_the_seq_of_their_last_change(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.put_resource(&who(), resource("test://a", "1"), WriteMode::Create)
        .await
        .unwrap();
    s.put_resource(&who(), resource("test://b", "1"), WriteMode::Create)
        .await
        .unwrap();
    let set = s.changes_since(0).await.unwrap();
    for info in s.list_resources().await.unwrap() {
        let change = set.changes.iter().find(|c| c.key == info.uri).unwrap();
        assert_eq!(u64::try_from(info.state.updated_seq).unwrap(), change.seq);
    }
    }
}

each_backend! {
    async fn another_instance_writes_are_seen(kind) {
    let t = TestStore::new(kind).await;
    let server = &*t.store;
    let cli = t.second().await;
    server
        .create_tool(&who(), "x", spec("1"), LIVE)
        .await
        .unwrap();
    let seen = server.current_seq().await.unwrap();
    cli.add_version(&who(), "x", spec("2"), LIVE).await.unwrap();
    cli.set_secret(&who(), "S", "v").await.unwrap();
    let set = server.changes_since(seen).await.unwrap();
    assert_eq!(
        keys(&set),
        [(ChangeKind::Tool, "x"), (ChangeKind::Secret, "S")]
    );
    assert_eq!(set.seq, seen + 2);
    // The reader updates its one entry from the store: the new current version.
    let entry = server.get("x").await.unwrap().unwrap();
    assert!(entry.tool.enabled);
    assert_eq!(entry.current.number, 2);
    assert_eq!(server.changes_since(set.seq).await.unwrap().changes, []);
    cli.close().await;
    }
}

/// Set in the child process of [`another_process_writes_are_seen`]: the database path.
const CHILD_DB_ENV: &str = "OMNIFORGE_STORE_FEED_CHILD_DB";

/// The child half of [`another_process_writes_are_seen`]; without its environment variable it
/// does nothing. It writes a tool version, a secret and a prompt, then exits.
#[tokio::test]
#[ignore = "child process of another_process_writes_are_seen"]
async fn feed_writer_child() {
    let Ok(path) = std::env::var(CHILD_DB_ENV) else {
        return;
    };
    let store = crate::util::open(std::path::Path::new(&path)).await;
    store
        .add_version(&who(), "shared", spec("child"), LIVE)
        .await
        .unwrap();
    store.set_secret(&who(), "CHILD", "secret").await.unwrap();
    store
        .put_prompt(&who(), prompt("from_child", "hi"), WriteMode::Create)
        .await
        .unwrap();
    store.close().await;
}

/// A second process (as the CLI is, beside a running server) writes; this process's reader sees
/// exactly those keys. The child is this same test binary, run again to select
/// [`feed_writer_child`].
#[test]
fn another_process_writes_are_seen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feed.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(SqliteStore::open(&path)).unwrap();
    rt.block_on(async {
        server
            .create_tool(&who(), "shared", spec("1"), LIVE)
            .await
            .unwrap();
        server
            .create_tool(&who(), "untouched", spec("1"), LIVE)
            .await
            .unwrap();
    });
    let seen = rt.block_on(server.current_seq()).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "changes::feed_writer_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB_ENV, &path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("1 passed"), "the child test ran: {stdout}");
    rt.block_on(async {
        let set = server.changes_since(seen).await.unwrap();
        assert_eq!(set.seq, seen + 3);
        assert!(set.reload.is_empty());
        assert_eq!(
            keys(&set),
            [
                (ChangeKind::Tool, "shared"),
                (ChangeKind::Secret, "CHILD"),
                (ChangeKind::Prompt, "from_child"),
            ]
        );
        assert_eq!(
            server.get("shared").await.unwrap().unwrap().current.number,
            2
        );
        server.close().await;
    });
}

each_backend! {
    async fn a_reader_behind_the_pruned_changes_reloads_exactly_the_kinds_it_missed(kind) {
    let t = TestStore::with(kind, StoreConfig {
        change_log_max_rows: 3,
        ..config()
    })
    .await;
    let s = &*t.store;
    // seq 1: a resource; 2: a secret; 3..=7: tools a..e. Three are kept: 5, 6, 7.
    s.put_resource(&who(), resource("test://r", "x"), WriteMode::Create)
        .await
        .unwrap();
    s.set_secret(&who(), "S", "v").await.unwrap();
    for name in ["a", "b", "c", "d", "e"] {
        s.create_tool(&who(), name, spec(name), LIVE).await.unwrap();
    }
    assert_eq!(s.current_seq().await.unwrap(), 7);

    let set = s.changes_since(0).await.unwrap();
    assert_eq!(set.seq, 7);
    assert_eq!(
        set.reload,
        [ChangeKind::Tool, ChangeKind::Resource, ChangeKind::Secret],
        "every kind whose changes after 0 were pruned"
    );
    assert_eq!(set.changes, [], "a reloaded kind lists no keys");
    assert!(set.reloads(ChangeKind::Tool) && !set.reloads(ChangeKind::Prompt));

    // After the resource, only the secret and tools were pruned; after the secret, only tools.
    assert_eq!(
        s.changes_since(1).await.unwrap().reload,
        [ChangeKind::Tool, ChangeKind::Secret]
    );
    assert_eq!(s.changes_since(2).await.unwrap().reload, [ChangeKind::Tool]);
    assert_eq!(s.changes_since(3).await.unwrap().reload, [ChangeKind::Tool]);
    // From 4 on, everything after it is kept: keys, no reload.
    let set = s.changes_since(4).await.unwrap();
    assert!(set.reload.is_empty());
    assert_eq!(
        keys(&set),
        [
            (ChangeKind::Tool, "c"),
            (ChangeKind::Tool, "d"),
            (ChangeKind::Tool, "e"),
        ]
    );

    // A new kind's changes stay exact even while tools are being reloaded.
    s.put_prompt(&who(), prompt("p", "x"), WriteMode::Create)
        .await
        .unwrap();
    let set = s.changes_since(3).await.unwrap();
    assert_eq!(set.reload, [ChangeKind::Tool]);
    assert_eq!(keys(&set), [(ChangeKind::Prompt, "p")]);

    // Another instance with its own (larger) setting sees the same floors.
    let other = t.second().await;
    assert_eq!(other.changes_since(0).await.unwrap().reload.len(), 3);
    other.close().await;
    }
}

each_backend! {
    async fn zero_kept_changes_means_every_reader_reloads_what_changed(kind) {
    let t = TestStore::with(kind, StoreConfig {
        change_log_max_rows: 0,
        ..config()
    })
    .await;
    let s = &*t.store;
    s.create_tool(&who(), "a", spec("a"), LIVE).await.unwrap();
    let set = s.changes_since(0).await.unwrap();
    assert_eq!(
        set,
        ChangeSet {
            seq: 1,
            reload: vec![ChangeKind::Tool],
            changes: vec![],
        }
    );
    assert!(s.changes_since(1).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_reader_ahead_of_the_database_reloads_everything() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.create_tool(&who(), "a", spec("a"), LIVE).await.unwrap();
    let backup = t.dir.path().join("backup.db");
    s.backup(&backup).await.unwrap();
    s.create_tool(&who(), "b", spec("b"), LIVE).await.unwrap();
    let seen = s.current_seq().await.unwrap();
    // The file is replaced by an older copy (a restore): the reader's seq is from the future.
    let restored = SqliteStore::open(&backup).await.unwrap();
    let set = restored.changes_since(seen).await.unwrap();
    assert_eq!(set.seq, 1);
    assert_eq!(set.reload, ChangeKind::ALL);
    assert_eq!(set.changes, []);
    let set = restored.changes_since(u64::MAX).await.unwrap();
    assert_eq!(set.reload, ChangeKind::ALL);
    restored.close().await;
}

each_backend! {
    multi_thread async fn wait_for_change_wakes_on_this_instances_commit(kind) {
    let t = TestStore::new(kind).await;
    let store = std::sync::Arc::new(t.second().await);
    let seen = store.current_seq().await.unwrap();
    let waiter = {
        let store = store.clone();
        // An hour: only the commit can end this wait within the test's limit.
        tokio::spawn(async move { store.wait_for_change(seen, Duration::from_secs(3600)).await })
    };
    store.set_secret(&who(), "S", "v").await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), waiter)
        .await
        .expect("woken by the commit")
        .unwrap();
    // A change already committed returns at once; without one, the wait ends at `max_wait`.
    tokio::time::timeout(
        Duration::from_secs(60),
        store.wait_for_change(seen, Duration::from_secs(3600)),
    )
    .await
    .expect("already changed");
    store
        .create_tool(&who(), "called", spec("c"), LIVE)
        .await
        .unwrap();
    let now = store.current_seq().await.unwrap();
    store.wait_for_change(now, Duration::from_millis(20)).await;
    // Call log writes and failed writes are no changes and wake no one.
    store.record_call(call("called", 1, 1)).await.unwrap();
    store.delete_secret(&who(), "GHOST").await.unwrap_err();
    assert!(
        tokio::time::timeout(
            Duration::from_millis(200),
            store.wait_for_change(now, Duration::from_secs(3600))
        )
        .await
        .is_err()
    );
    store.close().await;
    }
}

#[tokio::test]
async fn a_database_from_before_the_feed_starts_it_at_its_counter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    // Migrations 1 and 2 only, and some history, as a database written by an older build.
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let migrator = sqlx::migrate::Migrator::new(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations"
    )))
    .await
    .unwrap();
    migrator.run_to(2, &pool).await.unwrap();
    sqlx::query("UPDATE meta SET value = 41 WHERE key = 'data_version'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO secret (name, value, updated_at_ms) VALUES ('OLD', 'x', 1)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let store = crate::util::open(&path).await;
    assert_eq!(store.current_seq().await.unwrap(), 41);
    assert!(store.changes_since(41).await.unwrap().is_empty());
    // Whatever happened before the feed is unknown: a reader from then reloads every kind.
    assert_eq!(
        store.changes_since(40).await.unwrap().reload,
        ChangeKind::ALL
    );
    store.set_secret(&who(), "OLD", "y").await.unwrap();
    let set = store.changes_since(41).await.unwrap();
    assert_eq!(
        set.changes,
        [Change {
            seq: 42,
            kind: ChangeKind::Secret,
            key: "OLD".into(),
            at_ms: set.changes[0].at_ms,
        }]
    );
    store.close().await;
}

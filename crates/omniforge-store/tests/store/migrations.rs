//! A database written by the build before this schema (migrations 1 to 4) opens with its data
//! intact: tools keep their current versions, versions become live, old calls become stored
//! calls, and every foreign key still holds.

use std::path::Path;

use omniforge_store::{
    CallFilter, CallLog as _, CallSource, NewStatus, SecretStore as _, ToolStore, VersionStatus,
};

use crate::util::{raw, spec, who};

/// A database at migration 4 with two tools (one rolled back, one disabled), their calls and a
/// secret, inserted with the SQL of that schema.
async fn old_database(path: &Path) {
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let migrator = sqlx::migrate::Migrator::new(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations"
    )))
    .await
    .unwrap();
    migrator.run_to(4, &pool).await.unwrap();
    // One transaction: a tool and its current version reference each other (deferred).
    let statements = [
        "INSERT INTO tool VALUES ('a', 1, 1, 10, 20, 3)",
        "INSERT INTO tool VALUES ('b', 0, 1, 11, 21, 4)",
        "INSERT INTO tool_version (tool, number, description, input_schema, runtime, code, \
         dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets, author, \
         created_at_ms) VALUES \
         ('a', 1, 'a one', '{}', 'python', 'print(1)', '[]', 1000, 1024, 0, '', 'env-a1', '[\"K\"]', 'alice', 10), \
         ('a', 2, 'a two', '{}', 'python', 'print(2)', '[]', 1000, 1024, 0, '', 'env-a2', '[]', 'alice', 12), \
         ('b', 1, 'b one', '{}', 'python', 'print(3)', '[]', 1000, 1024, 1, '', 'env-b1', '[]', 'bob', 11)",
        "INSERT INTO call_log (tool, version, started_at_ms, duration_ms, outcome, exit_code, \
         bytes_out, principal, error) VALUES ('a', 2, 100, 5, 'exit', 3, 9, 'alice', 'boom'), \
         ('a', 1, 101, 6, 'ok', NULL, 10, NULL, NULL)",
        "INSERT INTO secret (name, value, updated_at_ms) VALUES ('K', 'plain', 1)",
        "UPDATE meta SET value = 4 WHERE key = 'data_version'",
    ];
    let mut tx = pool.begin().await.unwrap();
    for q in statements {
        sqlx::query(q).execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();
    pool.close().await;
}

#[tokio::test]
async fn an_older_database_keeps_its_tools_calls_and_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    old_database(&path).await;
    let s = crate::util::open(&path).await;

    let a = s.get("a").await.unwrap().unwrap();
    assert_eq!(a.tool.current_version, Some(1), "the rollback is kept");
    assert!(a.tool.enabled);
    assert_eq!(a.current.spec.description, "a one");
    assert_eq!(a.current.spec.examples, Vec::new());
    let b = s.tool("b").await.unwrap().unwrap();
    assert!(!b.enabled);
    assert_eq!(b.current_version, Some(1));
    for v in s.versions("a").await.unwrap() {
        assert_eq!(v.state.status, VersionStatus::Live);
        assert_eq!(v.state.decided_by, None);
    }
    assert_eq!(s.current_seq().await.unwrap(), 4);

    let calls = s.recent_calls("a", 10).await.unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].source, CallSource::Stored);
    assert_eq!(calls[1].version, Some(2));
    assert_eq!(calls[1].error.as_deref(), Some("boom"));
    assert_eq!(calls[1].principal.as_deref(), Some("alice"));
    assert_eq!(calls[0].arguments, None);
    assert_eq!(
        s.calls(&CallFilter {
            limit: 10,
            ..CallFilter::default()
        })
        .await
        .unwrap()
        .len(),
        2
    );

    // The secret was sealed at open, and no version has a grant yet.
    assert_eq!(
        s.secret_values(&["K".into()]).await.unwrap()["K"].expose(),
        "plain"
    );
    assert!(s.granted_secrets("a", 1).await.unwrap().is_empty());
    s.grant_secret(&who(), "K", "a", 1).await.unwrap();
    assert_eq!(
        s.granted_secrets("a", 1).await.unwrap()["K"].expose(),
        "plain"
    );

    // The new features work on it.
    s.add_version(&who(), "b", spec("pending"), NewStatus::Pending)
        .await
        .unwrap();
    s.purge(&who(), "a").await.unwrap();
    s.close().await;

    let pool = raw(&path).await;
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(check, "ok");
    let violations = sqlx::query("PRAGMA foreign_key_check")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(violations.is_empty());
    pool.close().await;
}

#[tokio::test]
async fn a_migration_that_would_break_a_foreign_key_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.db");
    old_database(&path).await;
    // A version of no tool, written with foreign keys off (as a hand edit could).
    let pool = raw(&path).await;
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("PRAGMA foreign_keys = OFF")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("INSERT INTO tool_version (tool, number, description, input_schema, runtime, code, dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets, author, created_at_ms) VALUES ('nobody', 1, 'd', '{}', 'python', 'c', '[]', 1, 1, 0, '', 'e', '[]', 'x', 1)")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    pool.close().await;
    let e = omniforge_store::SqliteStore::open(&path).await.unwrap_err();
    assert!(e.to_string().contains("foreign key"), "{e}");
    // Nothing of the new schema was committed.
    let pool = raw(&path).await;
    let applied: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(applied, 4);
    pool.close().await;
}

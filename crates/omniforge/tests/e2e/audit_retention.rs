//! Audit retention: `serve --audit-retention DURATION` prunes the audit records older than it
//! at start (and hourly), and the prune is itself audited (the cut, the rows removed), as the
//! store's principal; `--help` shows the flag and a malformed duration is refused. On a SQLite
//! file and on a database of the run's PostgreSQL cluster, read back through `omniforge-store`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{
    Actor, AuditAction, AuditFilter, AuditObject, AuditRecord, DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CALL_LOG_MAX_ROWS, DEFAULT_CALL_STATS_MAX_AGE, DEFAULT_CHANGE_LOG_MAX_ROWS,
    DEFAULT_MAX_READERS, Engine, NewResource, PgEnv, ResourceBody, STORE_PRINCIPAL, StoreConfig,
    WriteMode,
};
use omniforge_store::{AuditLog as _, ContentStore as _, ToolStore as _};

use crate::support::{Serve, cluster, eventually, omniforge_cli};

/// Opens the store at `url` with the default settings, as the CLI would.
async fn open(url: &str) -> Arc<Engine> {
    let config = StoreConfig {
        busy_timeout: DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: DEFAULT_CALL_LOG_MAX_ROWS,
        max_readers: DEFAULT_MAX_READERS,
        change_log_max_rows: DEFAULT_CHANGE_LOG_MAX_ROWS,
        call_stats_max_age: DEFAULT_CALL_STATS_MAX_AGE,
        keyring: None,
    };
    omniforge_store::open(url, &PgEnv::from_vars([]), &config)
        .await
        .unwrap()
}

/// Every audit record, newest first.
async fn records(store: &Engine) -> Vec<AuditRecord> {
    let all = AuditFilter {
        limit: 1000,
        ..AuditFilter::default()
    };
    store.audit(&all).await.unwrap()
}

/// A record, then a server with a retention of 1 ms: its prune at start removes the record
/// and leaves one record of itself.
async fn serve_prunes_at_start(database: &str, dir: &Path) {
    let store = open(database).await;
    let resource = NewResource {
        uri: "test://old".into(),
        name: "old".into(),
        title: None,
        description: None,
        mime_type: None,
        body: ResourceBody::Text("x".into()),
    };
    let admin = Actor::new("token:admin");
    store
        .put_resource(&admin, resource, WriteMode::Create)
        .await
        .unwrap();
    let old = records(&store).await;
    assert_eq!(old.len(), 1, "{old:?}");

    let data = dir.join("data");
    let mut server = Serve::command()
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(&["--database", database, "--audit-retention", "1ms"])
        .start()
        .await;
    // The prune runs beside the serving: wait (up to a deadline) for its record.
    let now = eventually(
        Duration::from_secs(30),
        "the prune's audit record",
        async || {
            let now = records(&store).await;
            now.iter()
                .any(|r| r.action == AuditAction::Prune)
                .then_some(now)
        },
    )
    .await;
    let stderr = server.output_tail();
    server.kill();
    assert_eq!(
        now.len(),
        1,
        "the old record went, the prune's stayed: {now:?}\n{stderr}"
    );
    let prune = &now[0];
    assert_eq!(
        (prune.action, prune.object, prune.principal.as_str()),
        (AuditAction::Prune, AuditObject::AuditLog, STORE_PRINCIPAL)
    );
    assert_eq!(prune.detail["removed"], 1, "{prune:?}");
    let cut = prune.detail["before_ms"].as_i64().unwrap();
    assert!(
        cut > old[0].at_ms,
        "cut {cut} after the old record {}",
        old[0].at_ms
    );
    store.close().await;
}

#[tokio::test]
async fn serve_prunes_the_audit_log_at_start_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("audit.db").display());
    serve_prunes_at_start(&url, dir.path()).await;
}

#[tokio::test]
async fn serve_prunes_the_audit_log_at_start_postgres() {
    let db = cluster().database("audit_retention").unwrap();
    let dir = tempfile::tempdir().unwrap();
    serve_prunes_at_start(&db.url(), dir.path()).await;
}

/// `serve --help` shows the flag; a malformed duration is refused before anything starts.
#[tokio::test]
async fn the_flag_is_in_help_and_parsed() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let (ok, help, err) = omniforge_cli(dir.path(), &["serve", "--help"], None).await;
    assert!(ok, "{help}{err}");
    assert!(help.contains("--audit-retention <DURATION>"), "{help}");
    assert!(help.contains("keep everything"), "{help}");

    let args = ["serve", "--audit-retention", "soon"];
    let (ok, out, err) = omniforge_cli(dir.path(), &args, None).await;
    assert!(!ok, "{out}{err}");
    assert!(err.contains("--audit-retention"), "{err}");
}

/// A zero retention would wipe the audit log at start: it is refused, and the store is not opened.
#[tokio::test]
async fn zero_retention_is_refused() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let args = ["serve", "--audit-retention", "0s"];
    let (ok, out, err) = omniforge_cli(dir.path(), &args, None).await;
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("--audit-retention must be longer than 0"),
        "{err}"
    );
    assert!(
        !dir.path().join("omniforge.db").exists(),
        "the store was opened"
    );
}

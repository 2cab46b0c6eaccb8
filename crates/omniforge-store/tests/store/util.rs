//! Shared helpers: a store of either backend in a fresh place (a SQLite file in a temporary
//! directory, or a database of its own on the run's throwaway PostgreSQL cluster), raw SQL on
//! it, version specs as data, and [`each_backend!`], which runs one test body on both.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{
    Actor, Annotations, Engine, JsonObject, Keyring, Limits, NewStatus, NewVersion, PgEnv, Runtime,
    SqliteStore, StoreConfig, ToolStore,
};
use omniforge_testpg::{Cluster, TestDb};
use serde_json::json;

/// Which backend a test body runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
}

/// Defines a module `NAME` with two tests, `NAME::sqlite` and `NAME::postgres`, each running
/// the body with `kind` set to its backend. `multi_thread` before `async fn` runs both on a
/// multi-thread runtime.
macro_rules! each_backend {
    ($(#[doc = $doc:expr])* async fn $name:ident($kind:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn body($kind: $crate::util::Kind) $body
            #[tokio::test]
            async fn sqlite() { body($crate::util::Kind::Sqlite).await }
            #[tokio::test]
            async fn postgres() { body($crate::util::Kind::Postgres).await }
        }
    };
    ($(#[doc = $doc:expr])* multi_thread async fn $name:ident($kind:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn body($kind: $crate::util::Kind) $body
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() { body($crate::util::Kind::Sqlite).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() { body($crate::util::Kind::Postgres).await }
        }
    };
}
pub(crate) use each_backend;

/// The run's PostgreSQL cluster (see `omniforge-testpg`), shared with every other test process.
pub(crate) fn cluster() -> &'static Cluster {
    omniforge_testpg::shared(Path::new(env!("CARGO_TARGET_TMPDIR"))).unwrap()
}

/// A store in its own place: for SQLite a file in a temporary directory (removed on drop, after
/// the store), for PostgreSQL a database of its own (dropped on drop).
pub(crate) struct TestStore {
    pub(crate) store: Arc<Engine>,
    /// The store's URL: `sqlite:PATH` or `postgres://...`.
    pub(crate) url: String,
    /// The SQLite file (for a PostgreSQL store, where it would be: nothing is there).
    pub(crate) path: PathBuf,
    /// A temporary directory for the SQLite file, backups and copies.
    pub(crate) dir: tempfile::TempDir,
    /// The PostgreSQL database, for raw SQL.
    pub(crate) db: Option<TestDb<'static>>,
}

impl TestStore {
    pub(crate) async fn new(kind: Kind) -> TestStore {
        TestStore::with(kind, config()).await
    }

    pub(crate) async fn with(kind: Kind, config: StoreConfig) -> TestStore {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let (url, db) = match kind {
            Kind::Sqlite => (format!("sqlite:{}", path.display()), None),
            Kind::Postgres => {
                let db = cluster().database("store").unwrap();
                (db.url(), Some(db))
            }
        };
        let store = open_url(&url, &config).await;
        TestStore {
            store,
            url,
            path,
            dir,
            db,
        }
    }

    /// Another instance on the same database, as a second process (the CLI, another replica)
    /// would open it: the default settings, with the same keyring.
    pub(crate) async fn second(&self) -> Arc<Engine> {
        open_url(&self.url, &defaults()).await
    }

    /// Another instance with other settings.
    pub(crate) async fn open_with(&self, config: &StoreConfig) -> Arc<Engine> {
        open_url(&self.url, config).await
    }

    /// Runs `sql` on the database beside the store, as another program would; its error text.
    pub(crate) async fn exec(&self, sql: &str) -> Result<(), String> {
        match &self.db {
            Some(db) => db.sql(sql).map(drop).map_err(|e| e.to_string()),
            None => {
                let pool = raw(&self.path).await;
                let r = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(&pool)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string());
                pool.close().await;
                r
            }
        }
    }

    /// The one integer `sql` selects, read beside the store.
    pub(crate) async fn count(&self, sql: &str) -> i64 {
        match &self.db {
            Some(db) => db.sql(sql).unwrap().trim().parse().unwrap(),
            None => {
                let pool = raw(&self.path).await;
                let n = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                pool.close().await;
                n
            }
        }
    }
}

/// Opens a store URL (no `PG*` variables: the URLs say everything).
pub(crate) async fn open_url(url: &str, config: &StoreConfig) -> Arc<Engine> {
    omniforge_store::open(url, &PgEnv::empty(), config)
        .await
        .unwrap()
}

/// The default settings with the tests' keyring, as the server and CLI open a store.
pub(crate) fn defaults() -> StoreConfig {
    StoreConfig {
        busy_timeout: omniforge_store::DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: omniforge_store::DEFAULT_CALL_LOG_MAX_ROWS,
        max_readers: omniforge_store::DEFAULT_MAX_READERS,
        change_log_max_rows: omniforge_store::DEFAULT_CHANGE_LOG_MAX_ROWS,
        call_stats_max_age: omniforge_store::DEFAULT_CALL_STATS_MAX_AGE,
        keyring: Some(keyring()),
    }
}

/// Opens the SQLite file `path` with [`defaults`] (SQLite-only tests).
pub(crate) async fn open(path: &Path) -> Engine {
    SqliteStore::open_with(path, &defaults()).await.unwrap()
}

/// The keyring every test store uses: one fixed key (tests of rotation make their own).
pub(crate) fn keyring() -> Keyring {
    Keyring::from_keys(vec![("test-key-1".into(), [7; 32])]).unwrap()
}

/// The settings of test stores (small limits, the tests' keyring).
pub(crate) fn config() -> StoreConfig {
    StoreConfig {
        busy_timeout: Duration::from_secs(10),
        call_log_max_rows: 1000,
        max_readers: 4,
        change_log_max_rows: 1000,
        call_stats_max_age: Duration::from_secs(8 * 24 * 3600),
        keyring: Some(keyring()),
    }
}

/// Who the tests act as.
pub(crate) fn who() -> Actor {
    Actor::new("tester")
}

/// The status most tests write versions with.
pub(crate) const LIVE: NewStatus = NewStatus::Live;

pub(crate) fn object(v: serde_json::Value) -> JsonObject {
    v.as_object().unwrap().clone()
}

/// A version spec whose every field derives from `tag`, so that two specs differ everywhere.
pub(crate) fn spec(tag: &str) -> NewVersion {
    NewVersion {
        title: Some(format!("Title {tag}")),
        description: format!("Does {tag}"),
        input_schema: object(json!({
            "type": "object",
            "properties": {"q": {"type": "string", "description": tag}},
            "required": ["q"]
        })),
        output_schema: Some(object(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        )),
        annotations: Annotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: None,
            open_world_hint: Some(true),
        },
        runtime: Runtime::Python,
        code: format!("import sys\nprint({tag:?})\n"),
        dependencies: vec![
            "httpx>=0.27".into(),
            format!("tag-{tag}==1.0; python_version >= '3.11'"),
        ],
        limits: Limits {
            timeout_ms: 30_000,
            memory_bytes: 512 << 20,
            network: true,
        },
        lock: format!("httpx==0.27.2 --hash=sha256:{tag}\n"),
        env_id: format!("env-{tag}"),
        secrets: vec!["API_TOKEN".into()],
        author: "alice".into(),
        examples: vec![],
        execution: Default::default(),
    }
}

/// Current versions of `list_enabled`, as `name@version`, in order.
pub(crate) async fn enabled(store: &dyn ToolStore) -> Vec<String> {
    store
        .list_enabled()
        .await
        .unwrap()
        .iter()
        .map(|t| format!("{}@{}", t.tool.name, t.current.number))
        .collect()
}

/// A plain connection to the store's file, for what the API cannot do (tampering, triggers).
pub(crate) async fn raw(path: &std::path::Path) -> sqlx::SqlitePool {
    sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap()
}

/// `spec(tag)` declaring `secrets`.
pub(crate) fn spec_with_secrets(tag: &str, secrets: &[&str]) -> NewVersion {
    NewVersion {
        secrets: secrets.iter().map(|s| s.to_string()).collect(),
        ..spec(tag)
    }
}

/// The actor named `principal`.
pub(crate) fn actor(principal: &str) -> Actor {
    Actor::new(principal)
}

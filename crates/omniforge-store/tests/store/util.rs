//! Shared helpers: a store in a fresh temporary directory, and version specs as data.

use std::path::PathBuf;
use std::time::Duration;

use omniforge_store::{
    Actor, Annotations, JsonObject, Keyring, Limits, NewStatus, NewVersion, Runtime, SqliteStore,
    StoreConfig, ToolStore,
};
use serde_json::json;

/// A file store in its own temporary directory (removed on drop, after the store).
pub(crate) struct TestStore {
    pub(crate) store: SqliteStore,
    pub(crate) path: PathBuf,
    pub(crate) dir: tempfile::TempDir,
}

impl TestStore {
    pub(crate) async fn new() -> TestStore {
        TestStore::with(config()).await
    }

    pub(crate) async fn with(config: StoreConfig) -> TestStore {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let store = SqliteStore::open_with(&path, &config).await.unwrap();
        TestStore { store, path, dir }
    }

    /// Another instance on the same file, as a second process (the CLI) would open it: the
    /// default settings, with the same keyring.
    pub(crate) async fn second(&self) -> SqliteStore {
        open(&self.path).await
    }
}

/// Opens `path` with the default settings and the tests' keyring, as the server and CLI do.
pub(crate) async fn open(path: &std::path::Path) -> SqliteStore {
    SqliteStore::open_with(
        path,
        &StoreConfig {
            busy_timeout: omniforge_store::DEFAULT_BUSY_TIMEOUT,
            call_log_max_rows: omniforge_store::DEFAULT_CALL_LOG_MAX_ROWS,
            max_readers: omniforge_store::DEFAULT_MAX_READERS,
            change_log_max_rows: omniforge_store::DEFAULT_CHANGE_LOG_MAX_ROWS,
            call_stats_max_age: omniforge_store::DEFAULT_CALL_STATS_MAX_AGE,
            keyring: Some(keyring()),
        },
    )
    .await
    .unwrap()
}

/// The keyring every test store uses: one fixed key (tests of rotation make their own).
pub(crate) fn keyring() -> Keyring {
    Keyring::from_keys(vec![("test-key-1".into(), [7; 32])]).unwrap()
}

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

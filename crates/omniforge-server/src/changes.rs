//! The change feed consumer: follows the store's change feed and applies each kind of change
//! to its side — tools to the catalog (one entry per changed tool), content to the content
//! snapshot. Secrets are read per call, so a secret change needs no reload.
//!
//! The store numbers every committed change; the consumer remembers the number it has applied,
//! asks what changed after it ([`ToolStore::changes_since`](omniforge_store::ToolStore::changes_since)), applies that, and waits for the
//! next change ([`ToolStore::wait_for_change`](omniforge_store::ToolStore::wait_for_change): at once for a write through this process,
//! within [`POLL`] for another process's; a store with notifications, PostgreSQL `LISTEN`, wakes
//! it for every writer).

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{ChangeKind, ChangeSet, Store, StoreError};
use tokio_util::sync::CancellationToken;

use crate::content::snapshot::Content;
use crate::tools::stored::source::StoredSource;

/// The longest the consumer waits before it asks the store again (another process's writes
/// cannot wake it on SQLite).
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The sides a change is applied to.
pub(crate) struct Sides {
    /// Stored tools in the catalog.
    pub(crate) tools: Arc<StoredSource>,
    /// Stored resources, templates and prompts.
    pub(crate) content: Arc<Content>,
}

impl Sides {
    /// Applies one set of changes, each kind to its side only.
    ///
    /// # Errors
    /// The store cannot be read; the caller asks again from the same number.
    pub(crate) async fn apply(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        if changes.reloads(ChangeKind::Tool) {
            self.tools.reload_all().await?;
        } else {
            for name in changes.keys(ChangeKind::Tool) {
                self.tools.reload(name).await?;
            }
        }
        let content = [
            ChangeKind::Resource,
            ChangeKind::ResourceTemplate,
            ChangeKind::Prompt,
        ];
        if content.into_iter().any(|kind| changes.touches(kind)) {
            self.content.reload().await?;
        }
        if changes.touches(ChangeKind::Secret) {
            tracing::debug!("secrets changed; runs read them per call, nothing to reload");
        }
        Ok(())
    }
}

/// Follows `store`'s changes after `seq` until `stop` fires.
pub(crate) async fn follow(
    store: Arc<dyn Store>,
    mut seq: u64,
    sides: Sides,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = store.wait_for_change(seq, POLL) => {}
        }
        let changes = match store.changes_since(seq).await {
            Ok(changes) => changes,
            Err(error) => {
                tracing::warn!(%error, "reading the store's changes failed");
                sleep_or_stop(&stop).await;
                continue;
            }
        };
        if changes.is_empty() {
            seq = changes.seq;
            continue;
        }
        match sides.apply(&changes).await {
            Ok(()) => seq = changes.seq,
            Err(error) => {
                tracing::warn!(%error, "applying the store's changes failed");
                sleep_or_stop(&stop).await;
            }
        }
    }
}

/// After a failure: wait one poll interval before trying again (the store may be down).
async fn sleep_or_stop(stop: &CancellationToken) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(POLL) => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use omniforge_script::{HostEnv, SandboxLevel};
    use omniforge_store::{
        Actor, Annotations, Limits, NewStatus, NewVersion, Runtime, SqliteStore,
    };
    use serde_json::json;

    use super::*;
    use crate::catalog::publish::Catalog;
    use crate::catalog::schema_profile::SchemaProfile;
    use crate::peers::Peers;
    use crate::runs::input_required::StateCodec;
    use crate::script_host::host::{ScriptHost, ScriptSettings};
    use crate::telemetry::call_log::CallLogWriter;
    use crate::tools::stored::call::StoredTools;
    use crate::tools::stored::kept::KeptOutputs;
    use crate::tools::stored::shape::Shaper;

    fn version(description: &str) -> NewVersion {
        NewVersion {
            title: None,
            description: description.into(),
            input_schema: json!({"type": "object"}).as_object().cloned().unwrap(),
            output_schema: None,
            annotations: Annotations::default(),
            runtime: Runtime::Python,
            code: "print(1)".into(),
            dependencies: vec![],
            limits: Limits {
                timeout_ms: 1000,
                memory_bytes: 1 << 28,
                network: false,
            },
            lock: String::new(),
            env_id: "none".into(),
            secrets: vec![],
            author: "t".into(),
            examples: Vec::new(),
            execution: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_changed_tool_is_reloaded_alone_and_content_only_when_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().await.unwrap());
        let host = Arc::new(
            ScriptHost::new(
                ScriptSettings {
                    data_dir: dir.path().to_owned(),
                    python: "python3".into(),
                    uv: None,
                    allow_source_builds: false,
                    sandbox: SandboxLevel::Off,
                    default_timeout: Duration::from_secs(1),
                    max_timeout: Duration::from_secs(1),
                    memory_bytes: 1 << 28,
                    host: HostEnv::from_vars(std::env::vars_os()),
                    disabled_layers: Vec::new(),
                    warm_pool: 0,
                    warm_idle: std::time::Duration::from_secs(600),
                },
                Arc::new(crate::telemetry::metrics::Metrics::new(1, true)),
            )
            .unwrap(),
        );
        let catalog = Arc::new(Catalog::new(SchemaProfile::AsAuthored));
        let states = Arc::new(StateCodec::new(&[]).unwrap());
        let metrics = Arc::new(crate::telemetry::metrics::Metrics::new(1, true));
        let tools = Arc::new(StoredTools {
            store: store.clone(),
            call_log: Arc::new(CallLogWriter::start(
                store.clone(),
                Default::default(),
                metrics,
            )),
            host: host.clone(),
            shaper: Shaper {
                max_result_bytes: 1024,
                kept: Arc::new(KeptOutputs::new(store.clone(), Duration::from_secs(60))),
            },
            states: states.clone(),
            versions: Default::default(),
        });
        let source = Arc::new(StoredSource::new(store.clone(), tools, &catalog));
        store
            .create_tool(&Actor::new("t"), "a", version("a1"), NewStatus::Live)
            .await
            .unwrap();
        store
            .create_tool(&Actor::new("t"), "b", version("b1"), NewStatus::Live)
            .await
            .unwrap();
        let seq = store.current_seq().await.unwrap();
        let content = Content::load(store.clone(), host, states, Arc::new(Peers::default()))
            .await
            .unwrap();
        source.reload_all().await.unwrap();
        let sides = Sides {
            tools: source,
            content: content.clone(),
        };
        let before = catalog.snapshot();
        let content_before = content.snapshot();

        store
            .add_version(&Actor::new("t"), "a", version("a2"), NewStatus::Live)
            .await
            .unwrap();
        let changes = store.changes_since(seq).await.unwrap();
        assert_eq!(changes.keys(ChangeKind::Tool).collect::<Vec<_>>(), ["a"]);
        sides.apply(&changes).await.unwrap();

        let after = catalog.snapshot();
        let entry = |s: &crate::catalog::snapshot::Snapshot, name: &str| {
            s.get(name).map(|e| e as *const _).unwrap()
        };
        // `b` is the very same entry; `a` was replaced, and moved to the front.
        assert_eq!(entry(&before, "b"), entry(&after, "b"));
        assert_ne!(entry(&before, "a"), entry(&after, "a"));
        assert_eq!(
            after.get("a").unwrap().tool().description.as_deref(),
            Some("a2")
        );
        assert_eq!(&*after.entries()[0].name, "a");
        // No content changed: the content snapshot was not reloaded.
        assert!(Arc::ptr_eq(&content_before, &content.snapshot()));
    }
}

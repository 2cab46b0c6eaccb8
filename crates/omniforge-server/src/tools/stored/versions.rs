//! The versions stored calls run, read from the store at call time, with a small LRU cache.
//!
//! The catalog keeps a compact entry per stored tool (its served definition as JSON, the
//! version it serves, its author and task settings), not the version's code and schemas:
//! 100,000 stored tools must fit in a replica's 150 MB (issue 14). A call (and the argument
//! check before it) loads what it runs here. Versions are immutable but for their status,
//! and a tool purged and created again reuses version numbers, so an entry names its version
//! by tool, number and write time, and [`Versions::forget`] drops a tool's cached versions
//! whenever its catalog entry is reloaded (the status of a version moves only with a change
//! of its tool).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use lru::LruCache;
use omniforge_store::{Store, StoreError, ToolVersion};

use crate::error::CallError;
use crate::schema::LazySchema;

/// How many versions the cache keeps by default: the ones called lately (each holds its
/// code, its schemas and, once checked, their compiled validators).
pub(crate) const CACHED_VERSIONS: usize = 256;

/// The version a catalog entry serves.
#[derive(Debug, Clone)]
pub(crate) struct VersionRef {
    /// The tool's name.
    pub(crate) tool: Arc<str>,
    /// The version's number.
    pub(crate) number: u32,
    /// When it was written (tells a version from one of the same number written after a
    /// purge).
    pub(crate) created_at_ms: i64,
}

impl VersionRef {
    /// The version `version` names.
    pub(crate) fn of(version: &ToolVersion) -> VersionRef {
        VersionRef {
            tool: Arc::from(version.tool.as_str()),
            number: version.number,
            created_at_ms: version.created_at_ms,
        }
    }
}

/// A version as a call reads it: the version itself (without its lock and dependency list,
/// which a call never reads), and its schemas, compiled at first use.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The version.
    pub(crate) version: ToolVersion,
    /// Its inputSchema as authored.
    pub(crate) input: LazySchema,
    /// Its outputSchema, if it has one.
    pub(crate) output: Option<LazySchema>,
}

impl Loaded {
    fn new(mut version: ToolVersion) -> Loaded {
        let spec = &mut version.spec;
        spec.lock = String::new();
        spec.dependencies = Vec::new();
        let input = LazySchema::new(
            "the tool's inputSchema",
            Arc::new(std::mem::take(&mut spec.input_schema)),
        );
        let output = spec
            .output_schema
            .take()
            .map(|s| LazySchema::new("the outputSchema", Arc::new(s)));
        Loaded {
            version,
            input,
            output,
        }
    }
}

/// Loaded versions by tool name and version number, least recently used first out.
type Cache = LruCache<(Arc<str>, u32), Arc<Loaded>>;

/// The cache of loaded versions. A std lock, held only for map operations.
#[derive(Debug)]
pub(crate) struct Versions {
    cache: Mutex<Cache>,
}

impl Default for Versions {
    fn default() -> Versions {
        Versions::new(CACHED_VERSIONS)
    }
}

impl Versions {
    /// A cache of at most `capacity` versions (at least one).
    pub(crate) fn new(capacity: usize) -> Versions {
        Versions {
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }

    /// The version `at` names, from the cache or the store.
    ///
    /// # Errors
    /// [`CallError::UnknownTool`] when the version is gone (the tool was purged, and maybe
    /// created again: its entry is being replaced); [`CallError::Store`] when the store
    /// cannot be read.
    pub(crate) async fn load(
        &self,
        store: &dyn Store,
        at: &VersionRef,
    ) -> Result<Arc<Loaded>, CallError> {
        let key = (at.tool.clone(), at.number);
        if let Some(hit) = self
            .lock()
            .get(&key)
            .filter(|l| l.version.created_at_ms == at.created_at_ms)
        {
            return Ok(hit.clone());
        }
        let version = match store.version(&at.tool, at.number).await {
            Ok(version) if version.created_at_ms == at.created_at_ms => version,
            Ok(_) | Err(StoreError::NotFound { .. }) => return Err(CallError::UnknownTool),
            Err(error) => return Err(CallError::Store(error)),
        };
        let loaded = Arc::new(Loaded::new(version));
        self.lock().put(key, loaded.clone());
        Ok(loaded)
    }

    /// Drops every cached version of `tool` (its catalog entry is being reloaded).
    pub(crate) fn forget(&self, tool: &str) {
        let mut cache = self.lock();
        let keys: Vec<(Arc<str>, u32)> = cache
            .iter()
            .filter(|((name, _), _)| &**name == tool)
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            cache.pop(&key);
        }
    }

    /// Drops every cached version (the whole catalog is reloaded).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// How many versions are cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use omniforge_store::{
        Actor, Annotations, Limits, NewStatus, NewVersion, Runtime, SqliteStore, ToolStore,
    };
    use serde_json::json;

    use super::*;

    fn spec(code: &str) -> NewVersion {
        NewVersion {
            title: None,
            description: "d".into(),
            input_schema: json!({"type": "object", "required": ["x"]})
                .as_object()
                .cloned()
                .unwrap(),
            output_schema: None,
            annotations: Annotations::default(),
            runtime: Runtime::Python,
            code: code.into(),
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
    async fn a_version_is_read_once_until_forgotten_and_never_after_a_purge() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let who = Actor::new("t");
        let v1 = store
            .create_tool(&who, "a", spec("print(1)"), NewStatus::Live)
            .await
            .unwrap();
        let versions = Versions::new(2);
        let at = VersionRef::of(&v1);
        let first = versions.load(&store, &at).await.unwrap();
        assert_eq!(first.version.spec.code, "print(1)");
        assert!(first.input.schema().contains_key("required"));
        // A second call is served from the cache: the same allocation.
        let again = versions.load(&store, &at).await.unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        versions.forget("a");
        assert_eq!(versions.len(), 0);
        assert!(!Arc::ptr_eq(
            &first,
            &versions.load(&store, &at).await.unwrap()
        ));
        // Purged, then created again: version 1 again, another write. Once the reload
        // forgot the tool, the old entry's version is gone; the new one is read from the
        // store, never taken for the old one.
        store.purge(&who, "a").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let v1b = store
            .create_tool(&who, "a", spec("print(2)"), NewStatus::Live)
            .await
            .unwrap();
        assert_eq!(v1b.number, 1);
        versions.forget("a");
        assert!(matches!(
            versions.load(&store, &at).await,
            Err(CallError::UnknownTool)
        ));
        let new = versions.load(&store, &VersionRef::of(&v1b)).await.unwrap();
        assert_eq!(new.version.spec.code, "print(2)");
        // Bounded: the least recently used version goes first.
        let b = store
            .create_tool(&who, "b", spec("print(3)"), NewStatus::Live)
            .await
            .unwrap();
        let c = store
            .create_tool(&who, "c", spec("print(4)"), NewStatus::Live)
            .await
            .unwrap();
        versions.load(&store, &VersionRef::of(&b)).await.unwrap();
        versions.load(&store, &VersionRef::of(&c)).await.unwrap();
        assert_eq!(versions.len(), 2);
    }
}

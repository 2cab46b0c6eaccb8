//! The stored tool source: each enabled tool's current version as a catalog entry (its call
//! is a [`StoredCall`]), and each pending version (issue 17's approval gate) as an entry for
//! its author only. The whole list is loaded at start; afterwards a change of one tool
//! updates that tool's entries only.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use omniforge_store::{
    Annotations, CallSource, Store, StoreError, StoredTool, Tool as ToolRow, ToolVersion,
    VersionStatus,
};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::json;

use crate::auth::Scope;
use crate::catalog::call::{Call, CallResult};
use crate::catalog::entry::{Entry, Tasking, ToolSource};
use crate::catalog::publish::Catalog;
use crate::catalog::snapshot::Snapshot;
use crate::context::actor::Via;
use crate::context::request::RequestCx;
use crate::error::CallError;
use crate::tools::stored::call::{StoredCall, StoredTools};
use crate::tools::stored::versions::VersionRef;

/// The stored tools of one store, published into one catalog.
pub(crate) struct StoredSource {
    store: Arc<dyn Store>,
    tools: Arc<StoredTools>,
    /// Weak: the catalog's entries reach back to the authoring built-ins that hold this source.
    catalog: Weak<Catalog>,
    /// One reload at a time, held from the store read to the publish: a reload that read the
    /// store earlier can then never publish over one that read it later (an authoring write
    /// and the change feed reloading the same tool).
    reloading: tokio::sync::Mutex<()>,
}

impl StoredSource {
    /// The source of `store`'s tools, run by `tools`, published into `catalog`.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        tools: Arc<StoredTools>,
        catalog: &Arc<Catalog>,
    ) -> StoredSource {
        StoredSource {
            store,
            tools,
            catalog: Arc::downgrade(catalog),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    /// Re-reads every enabled tool and publishes the list.
    ///
    /// # Errors
    /// The store cannot be read.
    pub(crate) async fn reload_all(&self) -> Result<(), StoreError> {
        let _one = self.reloading.lock().await;
        self.tools.versions.clear();
        // Tool by tool as the rows arrive: only the compact entries are kept, never every
        // version decoded at once (100,000 tools, issue 14).
        let mut current = HashMap::new();
        let mut entries = Vec::new();
        let mut authors = Authors::default();
        self.store
            .for_each_enabled(&mut |t| {
                let number = t.current.number;
                let author = authors.get(&t.current.spec.author);
                let entry = self.entry(t).with_author(author);
                current.insert(entry.name.clone(), number);
                entries.push(entry);
            })
            .await?;
        let pending = self.pending_entries(None).await?;
        self.tools.host.warm().set_all(current);
        entries.shrink_to_fit();
        if let Some(catalog) = self.catalog.upgrade() {
            catalog.replace(ToolSource::Stored, entries);
            catalog.replace_pending(pending);
        }
        Ok(())
    }

    /// The pending versions of enabled tools (of tool `name` only, if given) as entries, each
    /// with its author.
    async fn pending_entries(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<(Arc<str>, Entry)>, StoreError> {
        let mut versions = self
            .store
            .versions_with_status(VersionStatus::Pending, None)
            .await?;
        versions.retain(|v| name.is_none_or(|n| v.tool == n));
        if versions.is_empty() {
            return Ok(Vec::new());
        }
        let mut rows: HashMap<String, Option<ToolRow>> = HashMap::new();
        let mut out = Vec::new();
        for version in versions {
            if !rows.contains_key(&version.tool) {
                let row = self.store.tool(&version.tool).await?;
                rows.insert(version.tool.clone(), row);
            }
            let Some(Some(row)) = rows
                .get(&version.tool)
                .filter(|r| r.as_ref().is_some_and(|t| t.enabled))
            else {
                continue;
            };
            let author: Arc<str> = Arc::from(version.spec.author.as_str());
            let stored = StoredTool {
                tool: row.clone(),
                current: version,
            };
            out.push((author.clone(), self.entry(stored).with_author(author)));
        }
        Ok(out)
    }

    /// Re-reads tool `name` and updates its entry: published when it exists and is enabled,
    /// removed otherwise. The warm pool hears of it (the templates of a version no longer
    /// current retire). Returns the published version.
    ///
    /// # Errors
    /// The store cannot be read.
    pub(crate) async fn reload(&self, name: &str) -> Result<Option<ToolVersion>, StoreError> {
        let _one = self.reloading.lock().await;
        self.tools.versions.forget(name);
        let stored = self.store.get(name).await?;
        let pending = self.pending_entries(Some(name)).await?;
        let Some(catalog) = self.catalog.upgrade() else {
            return Ok(None);
        };
        catalog.set_pending(name, pending);
        let warm = self.tools.host.warm();
        match stored.filter(|s| s.tool.enabled) {
            Some(stored) => {
                let version = stored.current.clone();
                warm.set_current(name, version.number);
                let author = Arc::from(version.spec.author.as_str());
                catalog.upsert(self.entry(stored).with_author(author));
                Ok(Some(version))
            }
            None => {
                warm.set_gone(name);
                catalog.remove(ToolSource::Stored, name);
                Ok(None)
            }
        }
    }

    /// [`reload`](Self::reload), then, when the tool is published, its current version's warm
    /// template for `principal` is started and awaited (create, update, rollback, enable:
    /// the author's first call is then warm).
    ///
    /// # Errors
    /// The store cannot be read.
    pub(crate) async fn reload_and_prepare(
        &self,
        name: &str,
        principal: &str,
    ) -> Result<(), StoreError> {
        if let Some(version) = self.reload(name).await? {
            self.tools.prepare_warm(&version, principal).await;
        }
        Ok(())
    }

    /// Runs the current version of the stored tool `name` once, for the command line
    /// (`omniforge tool run`). A disabled tool does not run, from the command line either.
    ///
    /// # Errors
    /// No such tool, a disabled tool, arguments that do not match, or what the call ends in.
    pub(crate) async fn run(
        &self,
        name: &str,
        arguments: JsonObject,
        cx: &RequestCx<'_>,
    ) -> CallResult {
        let stored = self
            .store
            .get(name)
            .await
            .map_err(CallError::Store)?
            .ok_or_else(|| CallError::NotRunnable(format!("no tool named {name:?}")))?;
        if !stored.tool.enabled {
            return Err(CallError::NotRunnable(format!(
                "tool {name:?} is disabled; enable it first (omniforge tool enable {name})"
            )));
        }
        let entry = self.entry(stored);
        let arguments = entry.check_arguments(arguments).await?;
        let catalog = Snapshot::default();
        entry
            .call
            .call(Call {
                arguments,
                cx,
                via: Via::CommandLine,
                catalog: &catalog,
            })
            .await
    }

    /// A catalog entry for a stored tool's version (its current one, or a pending one): its
    /// served definition, serialized; the version's code and schemas stay in the store.
    pub(crate) fn entry(&self, stored: StoredTool) -> Entry {
        let StoredTool {
            tool: row,
            current: mut version,
        } = stored;
        let spec = &mut version.spec;
        // Served as authored, except that an object schema without `properties` gets `{}`:
        // OpenAI-backed clients reject it otherwise (WIRE-24).
        let mut input_schema = std::mem::take(&mut spec.input_schema);
        if !input_schema.contains_key("properties") {
            input_schema.insert("properties".into(), json!({}));
        }
        let mut tool = Tool::new(
            row.name,
            std::mem::take(&mut spec.description),
            Arc::new(input_schema),
        );
        if let Some(title) = spec.title.take() {
            tool = tool.with_title(title);
        }
        if let Some(output) = spec.output_schema.take() {
            tool = tool.with_raw_output_schema(Arc::new(output));
        }
        let a = spec.annotations;
        if a != Annotations::default() {
            let mut annotations = ToolAnnotations::new();
            annotations.read_only_hint = a.read_only_hint;
            annotations.destructive_hint = a.destructive_hint;
            annotations.idempotent_hint = a.idempotent_hint;
            annotations.open_world_hint = a.open_world_hint;
            tool = tool.with_annotations(annotations);
        }
        // Made through another replica (or process on another machine): install its
        // environment now, so that the first call does not wait for it.
        self.tools
            .host
            .install_in_background(&spec.env_id, &spec.lock);
        let tasking = Tasking {
            support: spec.execution.task_support,
            start: spec.execution.task_start,
            source: CallSource::Stored,
            version: Some(version.number),
            timeout: Duration::from_millis(spec.limits.timeout_ms),
        };
        let version = VersionRef::of(&version);
        let name = version.tool.clone();
        let call = StoredCall {
            version,
            tools: self.tools.clone(),
        };
        let mut entry =
            Entry::checked_by_call(&tool, ToolSource::Stored, Scope::Call, Arc::new(call))
                .with_tasking(tasking);
        // One allocation of the name for the entry and its call.
        entry.name = name;
        entry
    }
}

/// The authors of a full reload, each name allocated once (100,000 tools, a few authors).
#[derive(Default)]
struct Authors(HashMap<String, Arc<str>>);

impl Authors {
    fn get(&mut self, author: &str) -> Arc<str> {
        if let Some(known) = self.0.get(author) {
            return known.clone();
        }
        let new: Arc<str> = Arc::from(author);
        self.0.insert(author.to_owned(), new.clone());
        new
    }
}

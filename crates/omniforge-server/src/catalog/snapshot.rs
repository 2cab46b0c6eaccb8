//! [`Snapshot`]: the merged catalog at one moment, and the routing of a `tools/call` in it:
//! lookup, visibility (scope), argument check, then the entry's [`ToolCall`](crate::catalog::call::ToolCall).
//!
//! Under the approval gate (issue 17) a snapshot also holds the pending versions of stored
//! tools, each seen only by its author: in place of the live entry of the same name, or as a
//! tool nobody else has yet. Everyone else's view, and what announces `list_changed`, is the
//! merge alone.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::JsonObject;

use futures::future::BoxFuture;

use crate::auth::Scope;
use crate::catalog::call::{Call, CallResult, Router};
use crate::catalog::entry::{Entry, ToolSource};
use crate::catalog::pages::{Page, PageCache, PageKey};
use crate::context::actor::Via;
use crate::context::request::RequestCx;
use crate::error::CallError;

/// An immutable, merged view of every source at one moment.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    entries: Vec<Arc<Entry>>,
    by_name: HashMap<Arc<str>, usize>,
    /// Pending versions by author (principal id), then tool name.
    pending: HashMap<Arc<str>, HashMap<Arc<str>, Arc<Entry>>>,
    /// The last pages of `tools/list` built from this snapshot.
    pages: PageCache,
}

impl Snapshot {
    /// The merge of per-source lists given in merge order; later duplicates are skipped.
    pub(crate) fn merge(sources: &[Vec<Arc<Entry>>]) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for entry in sources.iter().flatten() {
            if let Some(&first) = snapshot.by_name.get(&entry.name) {
                tracing::warn!(
                    tool = %entry.name,
                    kept = snapshot.entries[first].source.as_str(),
                    skipped = entry.source.as_str(),
                    "tool name collision; the later tool is skipped"
                );
                continue;
            }
            snapshot
                .by_name
                .insert(entry.name.clone(), snapshot.entries.len());
            snapshot.entries.push(entry.clone());
        }
        snapshot
    }

    /// The snapshot with `pending` (author, entry) added: each entry is seen by its author
    /// only. A pending entry whose name a built-in or manifest tool holds is skipped.
    pub(crate) fn with_pending(mut self, pending: &[(Arc<str>, Arc<Entry>)]) -> Snapshot {
        for (author, entry) in pending {
            if self
                .get(&entry.name)
                .is_some_and(|e| e.source != entry.source)
            {
                continue;
            }
            self.pending
                .entry(author.clone())
                .or_default()
                .insert(entry.name.clone(), entry.clone());
        }
        self
    }

    /// All entries in catalog order, as everyone sees them (no pending version).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> &[Arc<Entry>] {
        &self.entries
    }

    /// The entries `principal` sees, in catalog order: its own pending versions in place of
    /// the live ones, then its pending new tools (by name). Lazy: a first page of
    /// `tools/list` reads a page of a 100,000-tool catalog, not all of it.
    pub(crate) fn entries_for<'a>(
        &'a self,
        principal: Option<&str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Entry>> + Send + 'a> {
        let Some(mine) = principal.and_then(|p| self.pending.get(p)) else {
            return Box::new(self.entries.iter());
        };
        let mut new: Vec<&Arc<Entry>> = mine
            .values()
            .filter(|e| !self.by_name.contains_key(&e.name))
            .collect();
        new.sort_by(|a, b| a.name.cmp(&b.name));
        Box::new(
            self.entries
                .iter()
                .map(|e| mine.get(&e.name).unwrap_or(e))
                .chain(new),
        )
    }

    /// The page of `tools/list` that `principal`, allowed the scopes `allows` says, sees
    /// from `offset`: at most `size` listed entries as `Tool`s. `None`: `offset` is past the
    /// end. Kept for the next caller with the same view (`pages.rs`).
    pub(crate) fn page(
        &self,
        principal: Option<&str>,
        allows: impl Fn(Scope) -> bool + Copy,
        offset: usize,
        size: usize,
    ) -> Option<Arc<Page>> {
        let build = || {
            // Read up to the page's end and one more (is there a next page?), not the whole
            // catalog.
            let mut visible = self
                .entries_for(principal)
                .filter(|t| t.listed && allows(t.scope));
            if visible.by_ref().take(offset).count() < offset {
                return None;
            }
            let tools = visible.by_ref().take(size).map(|t| t.tool()).collect();
            let more = visible.next().is_some();
            Some(Page { tools, more })
        };
        if principal.is_some_and(|p| self.pending.contains_key(p)) {
            // A view of its own (its pending versions): built for it alone.
            return build().map(Arc::new);
        }
        self.pages
            .get_or_build(PageKey::new(offset, size, allows), build)
    }

    /// The entry called `name`, if the catalog has it (as everyone sees it).
    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &*self.entries[i])
    }

    /// The entry called `name` as `principal` sees it: its own pending version first.
    pub(crate) fn get_for(&self, name: &str, principal: Option<&str>) -> Option<&Entry> {
        principal
            .and_then(|p| self.pending.get(p))
            .and_then(|mine| mine.get(name))
            .map(|e| &**e)
            .or_else(|| self.get(name))
    }

    /// How many listed tools come from `source`.
    pub(crate) fn count(&self, source: ToolSource) -> usize {
        self.entries
            .iter()
            .filter(|t| t.source == source && t.listed)
            .count()
    }

    /// Whether `other` lists the same tools (what clients see; calls may differ).
    pub(crate) fn lists_same_tools(&self, other: &Snapshot) -> bool {
        // Compared in place: cloning 10,000 tools per reload only to compare them showed up in
        // the server's peak memory. An entry carried over unchanged is the same allocation.
        let mut a = self.entries.iter().filter(|t| t.listed);
        let mut b = other.entries.iter().filter(|t| t.listed);
        loop {
            match (a.next(), b.next()) {
                (None, None) => return true,
                (Some(x), Some(y))
                    if Arc::ptr_eq(x, y)
                        || (x.source == y.source && x.listing() == y.listing()) => {}
                _ => return false,
            }
        }
    }

    /// Routes one call: the tool must exist and be visible to the caller, and the arguments
    /// must match its inputSchema; then its [`ToolCall`](crate::catalog::call::ToolCall)
    /// runs. `via`: where the call came from.
    ///
    /// # Errors
    /// [`CallError::UnknownTool`], [`CallError::InvalidArguments`], or what the tool's call
    /// ends in.
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        cx: &RequestCx<'_>,
        via: Via<'_>,
    ) -> CallResult {
        let entry = self
            .get_for(name, cx.principal().map(|p| p.as_str()))
            .filter(|e| cx.allows(e.scope))
            .ok_or(CallError::UnknownTool)?;
        let arguments = entry.check_arguments(arguments).await?;
        entry
            .call
            .call(Call {
                arguments,
                cx,
                via,
                catalog: self,
            })
            .await
    }
}

impl Router for Snapshot {
    fn route<'a>(
        &'a self,
        name: &'a str,
        arguments: JsonObject,
        cx: &'a RequestCx<'a>,
        via: Via<'a>,
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(self.call(name, arguments, cx, via))
    }
}

//! [`Snapshot`]: the merged catalog at one moment, and the routing of a `tools/call` in it:
//! lookup, visibility (scope), argument check, then the entry's [`ToolCall`](crate::catalog::call::ToolCall).

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::JsonObject;

use futures::future::BoxFuture;

use crate::catalog::call::{Call, CallResult, Router};
use crate::catalog::entry::{Entry, ToolSource};
use crate::context::request::RequestCx;
use crate::error::CallError;

/// An immutable, merged view of every source at one moment.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    entries: Vec<Arc<Entry>>,
    by_name: HashMap<Arc<str>, usize>,
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

    /// All entries in catalog order.
    pub(crate) fn entries(&self) -> &[Arc<Entry>] {
        &self.entries
    }

    /// The entry called `name`, if the catalog has it.
    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &*self.entries[i])
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
                    if Arc::ptr_eq(x, y) || (x.source == y.source && x.tool == y.tool) => {}
                _ => return false,
            }
        }
    }

    /// Routes one call: the tool must exist and be visible to the caller, and the arguments
    /// must match its inputSchema; then its [`ToolCall`](crate::catalog::call::ToolCall)
    /// runs. `forwarded`: the call came through `omniforge_call_tool`.
    ///
    /// # Errors
    /// [`CallError::UnknownTool`], [`CallError::InvalidArguments`], or what the tool's call
    /// ends in.
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        cx: &RequestCx<'_>,
        forwarded: bool,
    ) -> CallResult {
        let entry = self
            .get(name)
            .filter(|e| cx.allows(e.scope))
            .ok_or(CallError::UnknownTool)?;
        let arguments = entry.check_arguments(arguments)?;
        entry
            .call
            .call(Call {
                arguments,
                cx,
                catalog: self,
                forwarded,
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
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(self.call(name, arguments, cx, true))
    }
}

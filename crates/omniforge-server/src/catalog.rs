//! The tool catalog: one ordered, de-duplicated view over every tool source.
//!
//! Sources are merged in a fixed order: built-ins, then manifest tools (configured by the
//! operator), then stored tools (most recently updated first, as the store hands them over).
//! A later tool whose name collides with an earlier one is skipped with a logged warning.
//!
//! The catalog is read on every `tools/list` and `tools/call`, and written rarely (a stored
//! tool changes, a manifest reloads). Readers take a cheap `Arc` clone of an immutable
//! [`Snapshot`]; writers build a new snapshot and publish it, then bump a `watch` channel
//! that the notifier turns into `notifications/tools/list_changed`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use tokio::sync::watch;

use crate::auth::Scope;
use crate::schema_profile::{self, SchemaProfile};

/// Where a tool comes from. The order of the variants is the merge order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolSource {
    /// Compiled into the server (`omniforge_*`).
    Builtin,
    /// Declared in an operator-configured forge manifest and proxied to a Connect service.
    Manifest,
    /// Forged by an agent and kept in the store.
    Stored,
}

impl ToolSource {
    /// The lower-case name used in logs and in `/healthz`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSource::Builtin => "builtin",
            ToolSource::Manifest => "manifest",
            ToolSource::Stored => "stored",
        }
    }
}

/// One tool as the catalog serves it.
#[derive(Debug, Clone)]
pub struct CatalogTool {
    /// The MCP tool definition sent in `tools/list`.
    pub tool: Tool,
    /// Where it comes from.
    pub source: ToolSource,
    /// How `tools/call` runs it.
    pub route: Route,
    /// The scope a caller needs to see and call it.
    pub required_scope: Scope,
    /// The inputSchema as authored (the served one may be rewritten by a schema profile).
    authored_input: Arc<rmcp::model::JsonObject>,
    /// `authored_input`, compiled at the first call (not per call, and not for tools never
    /// called: 10,000 stored tools must not hold 10,000 compiled validators).
    input_validator: Arc<std::sync::OnceLock<Result<jsonschema::Validator, String>>>,
}

/// How a call of a catalog tool is carried out.
#[derive(Debug, Clone)]
pub enum Route {
    /// A built-in, run in-process.
    Builtin,
    /// A manifest RPC, dispatched to its Connect service.
    Manifest(Arc<crate::manifests::ManifestRoute>),
    /// A streaming manifest RPC: reserved and callable by name, but never listed, and a call
    /// says streaming is not supported.
    Streaming,
    /// A stored (script) tool.
    Stored(Arc<crate::forge::StoredRoute>),
}

/// A JSON object schema written as a `json!` value (anything else reads as `{}`).
pub fn object_schema(schema: serde_json::Value) -> Arc<JsonObject> {
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

impl CatalogTool {
    /// A catalog entry.
    pub fn new(tool: Tool, source: ToolSource, route: Route, required_scope: Scope) -> CatalogTool {
        CatalogTool {
            authored_input: tool.input_schema.clone(),
            tool,
            source,
            route,
            required_scope,
            input_validator: Arc::default(),
        }
    }

    /// A built-in tool needing `scope`.
    pub fn builtin(
        name: &str,
        description: &str,
        input_schema: Arc<JsonObject>,
        annotations: ToolAnnotations,
        scope: Scope,
    ) -> CatalogTool {
        CatalogTool::new(
            Tool::new(name.to_owned(), description.to_owned(), input_schema)
                .with_annotations(annotations),
            ToolSource::Builtin,
            Route::Builtin,
            scope,
        )
    }

    /// Checks call arguments against the inputSchema; the error lists each violation.
    ///
    /// # Errors
    /// The violations, one per line, or a note that the schema does not compile.
    pub fn check_arguments(&self, arguments: &serde_json::Value) -> Result<(), String> {
        let compiled = self.input_validator.get_or_init(|| {
            jsonschema::validator_for(&serde_json::Value::Object((*self.authored_input).clone()))
                .map_err(|e| e.to_string())
        });
        match compiled {
            Ok(validator) => crate::schema::check(validator, arguments),
            Err(e) => Err(format!("the tool's inputSchema does not compile: {e}")),
        }
    }

    /// Whether `tools/list` shows it.
    pub fn is_listed(&self) -> bool {
        !matches!(self.route, Route::Streaming)
    }
}

/// An immutable, merged view of every source at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    tools: Vec<CatalogTool>,
    by_name: HashMap<String, usize>,
}

impl Snapshot {
    /// All tools in catalog order.
    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools
    }

    /// The tool called `name`, if the catalog has it.
    pub fn get(&self, name: &str) -> Option<&CatalogTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// How many tools come from `source`.
    pub fn count(&self, source: ToolSource) -> usize {
        self.tools
            .iter()
            .filter(|t| t.source == source && t.is_listed())
            .count()
    }
}

/// The merged tool catalog. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Catalog {
    /// The raw per-source lists, kept so one source can be replaced without the others.
    /// A std lock: held only to swap vectors, never across an `.await`.
    sources: RwLock<[Vec<CatalogTool>; 3]>,
    /// The published merge of `sources`.
    snapshot: RwLock<Arc<Snapshot>>,
    /// Bumped after every publish; the notifier waits on it.
    changes: watch::Sender<u64>,
    /// How schemas are served.
    profile: SchemaProfile,
}

impl Catalog {
    /// A catalog holding only `builtins`, serving schemas as authored.
    pub fn new(builtins: Vec<CatalogTool>) -> Self {
        Catalog::with_profile(builtins, SchemaProfile::AsAuthored)
    }

    /// A catalog holding only `builtins`, serving schemas in `profile`.
    pub fn with_profile(builtins: Vec<CatalogTool>, profile: SchemaProfile) -> Self {
        let (changes, _) = watch::channel(0);
        let catalog = Catalog {
            sources: RwLock::new([builtins, Vec::new(), Vec::new()]),
            snapshot: RwLock::new(Arc::default()),
            changes,
            profile,
        };
        catalog.publish();
        catalog
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces every tool of `source` and announces the change when the merged list differs.
    pub fn replace_source(&self, source: ToolSource, tools: Vec<CatalogTool>) {
        {
            let mut sources = self.sources.write().unwrap_or_else(|e| e.into_inner());
            sources[source as usize] = tools;
        }
        self.publish();
    }

    /// A receiver that sees a new value after every catalog change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Whether `name` is taken by a source that outranks stored tools (built-in or manifest).
    pub fn is_reserved(&self, name: &str) -> bool {
        let sources = self.sources.read().unwrap_or_else(|e| e.into_inner());
        sources[..ToolSource::Stored as usize]
            .iter()
            .flatten()
            .any(|t| t.tool.name == name)
    }

    fn publish(&self) {
        let merged = {
            let sources = self.sources.read().unwrap_or_else(|e| e.into_inner());
            merge(&sources, self.profile)
        };
        let changed = {
            let mut current = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
            let changed = !same_tools(&current.tools, &merged.tools);
            *current = Arc::new(merged);
            changed
        };
        if changed {
            self.changes.send_modify(|v| *v += 1);
        }
    }
}

fn merge(sources: &[Vec<CatalogTool>; 3], profile: SchemaProfile) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for tool in sources.iter().flatten() {
        let name = tool.tool.name.to_string();
        if let Some(&first) = snapshot.by_name.get(&name) {
            tracing::warn!(
                tool = %name,
                kept = snapshot.tools[first].source.as_str(),
                skipped = tool.source.as_str(),
                "tool name collision; the later tool is skipped"
            );
            continue;
        }
        snapshot.by_name.insert(name, snapshot.tools.len());
        let mut tool = tool.clone();
        if profile == SchemaProfile::Conservative {
            // Served in the conservative form; arguments are still checked against the
            // authored schema (compiled in `CatalogTool::new`).
            tool.tool.input_schema =
                Arc::new(schema_profile::conservative(&tool.tool.input_schema));
            if let Some(output) = &tool.tool.output_schema {
                tool.tool.output_schema = Some(Arc::new(schema_profile::conservative(output)));
            }
        }
        snapshot.tools.push(tool);
    }
    snapshot
}

/// Whether two merges would list the same tools (what clients see; routes may differ).
fn same_tools<'a>(a: &'a [CatalogTool], b: &'a [CatalogTool]) -> bool {
    // Compared in place: cloning 10,000 tools per reload only to compare them showed up in
    // the server's peak memory.
    let listed = |v: &'a [CatalogTool]| v.iter().filter(|t| t.is_listed());
    listed(a)
        .map(|t| (t.source, &t.tool))
        .eq(listed(b).map(|t| (t.source, &t.tool)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, source: ToolSource) -> CatalogTool {
        let schema = json!({"type": "object"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        CatalogTool::new(
            Tool::new(name.to_owned(), "d", Arc::new(schema)),
            source,
            Route::Builtin,
            Scope::Call,
        )
    }

    #[test]
    fn merge_keeps_source_order_and_skips_collisions() {
        let catalog = Catalog::new(vec![tool("a", ToolSource::Builtin)]);
        let rx = catalog.subscribe();
        catalog.replace_source(
            ToolSource::Stored,
            vec![
                tool("s1", ToolSource::Stored),
                tool("m", ToolSource::Stored),
            ],
        );
        catalog.replace_source(
            ToolSource::Manifest,
            vec![
                tool("m", ToolSource::Manifest),
                tool("a", ToolSource::Manifest),
            ],
        );
        let snap = catalog.snapshot();
        let names: Vec<_> = snap
            .tools()
            .iter()
            .map(|t| t.tool.name.to_string())
            .collect();
        assert_eq!(names, ["a", "m", "s1"]);
        assert_eq!(snap.get("m").map(|t| t.source), Some(ToolSource::Manifest));
        assert!(catalog.is_reserved("m"));
        assert!(!catalog.is_reserved("s1"));
        assert!(rx.has_changed().unwrap_or(false));
    }

    #[test]
    fn unchanged_replace_does_not_announce() {
        let catalog = Catalog::new(vec![tool("a", ToolSource::Builtin)]);
        let rx = catalog.subscribe();
        catalog.replace_source(ToolSource::Stored, Vec::new());
        assert!(!rx.has_changed().unwrap_or(true));
    }
}

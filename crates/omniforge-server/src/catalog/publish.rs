//! [`Catalog`]: the per-source entry lists, and their merge published as a [`Snapshot`].
//!
//! Sources are merged in a fixed order: built-ins, then manifest tools (configured by the
//! operator), then stored tools (most recently updated first). A later tool whose name collides
//! with an earlier one is skipped with a logged warning.
//!
//! The catalog is read on every `tools/list` and `tools/call`, and written rarely (a stored
//! tool changes, a manifest reloads). Readers take a cheap `Arc` clone of the immutable
//! snapshot. Writers change a source and publish the new merge **under one lock**, so two
//! sources changing at once can never publish a stale merge; then they bump a `watch` channel
//! that the notifier turns into `notifications/tools/list_changed`.
//!
//! The search index ([`Index`]) follows the lists: each writer changes it by the same delta
//! (one entry for an upsert, a source's list for a replace) and publishes the snapshot
//! while it holds the index's write lock, so a search, which holds the read lock, always sees
//! the index and the snapshot of one moment.

use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockWriteGuard};

use tokio::sync::watch;

use crate::catalog::entry::{Entry, ToolSource};
use crate::catalog::schema_profile::{self, SchemaProfile};
use crate::catalog::search::{Hits, Index, Query};
use crate::catalog::snapshot::Snapshot;

/// The raw lists, one per source, in merge order.
type Sources = [Vec<Arc<Entry>>; 3];

/// What a publish merges: the per-source lists, and the pending versions of stored tools
/// (issue 17's approval gate), each with its author.
#[derive(Debug, Default)]
struct Lists {
    sources: Sources,
    pending: Vec<(Arc<str>, Arc<Entry>)>,
}

/// The merged tool catalog. Shared behind an `Arc`.
#[derive(Debug)]
pub(crate) struct Catalog {
    /// The per-source lists. Every writer holds this lock from its change through the publish
    /// of the merge, so publishes happen in the order of the changes. A std lock: never held
    /// across an `.await`.
    sources: Mutex<Lists>,
    /// The published merge. Readers take it for an `Arc` clone; a writer replaces it (while
    /// holding `sources`).
    snapshot: RwLock<Arc<Snapshot>>,
    /// The search index over every list. Written only while `sources` is held.
    index: RwLock<Index>,
    /// Bumped after every publish that changes what `tools/list` shows; the notifier waits on it.
    changes: watch::Sender<u64>,
    /// How schemas are served.
    profile: SchemaProfile,
}

impl Catalog {
    /// An empty catalog serving schemas in `profile`.
    pub(crate) fn new(profile: SchemaProfile) -> Catalog {
        let (changes, _) = watch::channel(0);
        Catalog {
            sources: Mutex::default(),
            snapshot: RwLock::new(Arc::default()),
            index: RwLock::default(),
            changes,
            profile,
        }
    }

    /// The current snapshot.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The entries `query` finds, best first.
    pub(crate) fn search(&self, query: &Query<'_>) -> Hits {
        self.index
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .search(query)
    }

    /// How many entries the search index holds, and its size in bytes (roughly).
    pub(crate) fn index_size(&self) -> (usize, usize) {
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        (index.len(), index.heap_bytes())
    }

    /// A receiver that sees a new value after every change of what `tools/list` shows.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Replaces every entry of `source`.
    pub(crate) fn replace(&self, source: ToolSource, entries: Vec<Entry>) {
        let mut entries: Vec<Arc<Entry>> = entries.into_iter().map(|e| self.prepare(e)).collect();
        // The collect reuses the `Vec<Entry>`'s buffer (an `Entry` is ~14 times an `Arc`): without
        // this, 100,000 stored tools kept an 11 MB buffer for their 0.8 MB of `Arc`s (heaptrack).
        entries.shrink_to_fit();
        let mut lists = self.lock();
        let mut index = self.index_mut();
        index.replace_source(source, &entries);
        lists.sources[source as usize] = entries;
        self.publish(&lists);
    }

    /// Adds or replaces one entry of its source, by name, at the front of the source's list
    /// (stored tools are listed most recently updated first).
    pub(crate) fn upsert(&self, entry: Entry) {
        let source = entry.source as usize;
        let entry = self.prepare(entry);
        let mut lists = self.lock();
        let mut index = self.index_mut();
        index.upsert(entry.clone(), None);
        let list = &mut lists.sources[source];
        list.retain(|e| e.name != entry.name);
        list.insert(0, entry);
        self.publish(&lists);
    }

    /// Removes the entry `name` of `source`, if it is there.
    pub(crate) fn remove(&self, source: ToolSource, name: &str) {
        let mut lists = self.lock();
        let list = &mut lists.sources[source as usize];
        let before = list.len();
        list.retain(|e| &*e.name != name);
        if list.len() != before {
            let mut index = self.index_mut();
            index.remove(source, name);
            self.publish(&lists);
        }
    }

    /// Replaces every pending entry (each with its author's principal id). What `tools/list`
    /// shows to everyone is unchanged, so nothing is announced.
    pub(crate) fn replace_pending(&self, entries: Vec<(Arc<str>, Entry)>) {
        let entries: Vec<_> = entries
            .into_iter()
            .map(|(author, e)| (author, self.prepare(e)))
            .collect();
        let mut lists = self.lock();
        let mut index = self.index_mut();
        index.replace_pending(None, &entries);
        lists.pending = entries;
        self.publish(&lists);
    }

    /// Replaces the pending entries of tool `name` (each with its author's principal id).
    pub(crate) fn set_pending(&self, name: &str, entries: Vec<(Arc<str>, Entry)>) {
        let entries: Vec<_> = entries
            .into_iter()
            .map(|(author, e)| (author, self.prepare(e)))
            .collect();
        let mut lists = self.lock();
        let before = lists.pending.len();
        lists.pending.retain(|(_, e)| &*e.name != name);
        if entries.is_empty() && lists.pending.len() == before {
            return;
        }
        let mut index = self.index_mut();
        index.replace_pending(Some(name), &entries);
        lists.pending.extend(entries);
        self.publish(&lists);
    }

    /// Whether `name` is taken by a source that outranks stored tools (built-in or manifest).
    pub(crate) fn is_reserved(&self, name: &str) -> bool {
        self.lock().sources[..ToolSource::Stored as usize]
            .iter()
            .flatten()
            .any(|e| &*e.name == name)
    }

    fn lock(&self) -> MutexGuard<'_, Lists> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The index, for a writer that holds `sources` (and publishes before letting it go).
    fn index_mut(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies the schema profile once, when the entry arrives (not at every merge).
    fn prepare(&self, mut entry: Entry) -> Arc<Entry> {
        if self.profile == SchemaProfile::Conservative {
            // Served in the conservative form; arguments are still checked against the
            // authored schema, which the entry keeps.
            let mut tool = entry.tool();
            tool.input_schema = Arc::new(schema_profile::conservative(&tool.input_schema));
            if let Some(output) = &tool.output_schema {
                tool.output_schema = Some(Arc::new(schema_profile::conservative(output)));
            }
            entry.set_tool(&tool);
        }
        Arc::new(entry)
    }

    /// Publishes the merge of `lists`; the caller holds the `sources` lock. Only a change of
    /// what every principal sees is announced: a pending entry is its author's alone.
    fn publish(&self, lists: &Lists) {
        let merged = Snapshot::merge(&lists.sources).with_pending(&lists.pending);
        let changed = {
            let mut current = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
            let changed = !current.lists_same_tools(&merged);
            *current = Arc::new(merged);
            changed
        };
        if changed {
            self.changes.send_modify(|v| *v += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scope;
    use crate::catalog::call::{Call, CallFuture, ToolCall, ready};
    use crate::error::CallError;
    use rmcp::model::Tool;
    use serde_json::json;

    struct Nothing;
    impl ToolCall for Nothing {
        fn call<'a>(&'a self, _: Call<'a>) -> CallFuture<'a> {
            ready(Err(CallError::UnknownTool))
        }
    }

    fn tool(name: &str, source: ToolSource) -> Entry {
        described(name, source, "d")
    }

    fn described(name: &str, source: ToolSource, description: &'static str) -> Entry {
        let schema = json!({"type": "object"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        Entry::new(
            Tool::new(name.to_owned(), description, Arc::new(schema)),
            source,
            Scope::Call,
            Arc::new(Nothing),
        )
    }

    fn names(catalog: &Catalog) -> Vec<String> {
        catalog
            .snapshot()
            .entries()
            .iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    #[test]
    fn merge_keeps_source_order_and_skips_collisions() {
        let catalog = Catalog::new(SchemaProfile::AsAuthored);
        catalog.replace(ToolSource::Builtin, vec![tool("a", ToolSource::Builtin)]);
        let rx = catalog.subscribe();
        catalog.replace(
            ToolSource::Stored,
            vec![
                tool("s1", ToolSource::Stored),
                tool("m", ToolSource::Stored),
            ],
        );
        catalog.replace(
            ToolSource::Manifest,
            vec![
                tool("m", ToolSource::Manifest),
                tool("a", ToolSource::Manifest),
            ],
        );
        assert_eq!(names(&catalog), ["a", "m", "s1"]);
        let snap = catalog.snapshot();
        assert_eq!(snap.get("m").map(|t| t.source), Some(ToolSource::Manifest));
        assert!(catalog.is_reserved("m"));
        assert!(!catalog.is_reserved("s1"));
        assert!(rx.has_changed().unwrap_or(false));
    }

    #[test]
    fn a_replaced_source_keeps_no_more_room_than_its_entries() {
        let catalog = Catalog::new(SchemaProfile::AsAuthored);
        let entries: Vec<Entry> = (0..1000)
            .map(|i| tool(&format!("t{i}"), ToolSource::Stored))
            .collect();
        catalog.replace(ToolSource::Stored, entries);
        let lists = catalog.lock();
        let stored = &lists.sources[ToolSource::Stored as usize];
        assert_eq!(stored.len(), 1000);
        assert_eq!(stored.capacity(), 1000, "the entries' buffer was kept");
    }

    #[test]
    fn unchanged_replace_does_not_announce() {
        let catalog = Catalog::new(SchemaProfile::AsAuthored);
        catalog.replace(ToolSource::Builtin, vec![tool("a", ToolSource::Builtin)]);
        let rx = catalog.subscribe();
        catalog.replace(ToolSource::Stored, Vec::new());
        assert!(!rx.has_changed().unwrap_or(true));
    }

    #[test]
    fn one_entry_is_updated_in_place_of_the_list() {
        let catalog = Catalog::new(SchemaProfile::AsAuthored);
        catalog.replace(
            ToolSource::Stored,
            vec![tool("x", ToolSource::Stored), tool("y", ToolSource::Stored)],
        );
        catalog.upsert(tool("y", ToolSource::Stored));
        assert_eq!(names(&catalog), ["y", "x"]);
        catalog.upsert(tool("z", ToolSource::Stored));
        assert_eq!(names(&catalog), ["z", "y", "x"]);
        catalog.remove(ToolSource::Stored, "y");
        assert_eq!(names(&catalog), ["z", "x"]);
    }

    #[test]
    fn pending_entries_are_their_authors_alone_and_never_announced() {
        let catalog = Catalog::new(SchemaProfile::AsAuthored);
        catalog.replace(ToolSource::Builtin, vec![tool("b", ToolSource::Builtin)]);
        catalog.replace(ToolSource::Stored, vec![tool("x", ToolSource::Stored)]);
        let rx = catalog.subscribe();
        let author: Arc<str> = Arc::from("token:w");
        catalog.set_pending(
            "x",
            vec![(author.clone(), described("x", ToolSource::Stored, "v2"))],
        );
        catalog.set_pending("y", vec![(author.clone(), tool("y", ToolSource::Stored))]);
        // A pending entry never shadows a built-in.
        catalog.set_pending("b", vec![(author.clone(), tool("b", ToolSource::Stored))]);
        assert!(
            !rx.has_changed().unwrap_or(true),
            "a pending write was announced"
        );
        let snap = catalog.snapshot();
        let view = |p: Option<&str>| -> Vec<(String, String)> {
            snap.entries_for(p)
                .map(|e| {
                    let tool = e.tool();
                    let d = tool.description.as_deref().unwrap_or("");
                    (tool.name.to_string(), d.to_owned())
                })
                .collect()
        };
        let everyone = [("b", "d"), ("x", "d")].map(|(n, d)| (n.to_owned(), d.to_owned()));
        assert_eq!(view(None), everyone);
        assert_eq!(view(Some("token:other")), everyone);
        assert_eq!(
            view(Some("token:w")),
            [("b", "d"), ("x", "v2"), ("y", "d")].map(|(n, d)| (n.to_owned(), d.to_owned()))
        );
        assert!(snap.get_for("y", Some("token:w")).is_some());
        assert!(snap.get_for("y", Some("token:other")).is_none());
        assert!(snap.get_for("y", None).is_none());
        assert_eq!(
            snap.get_for("b", Some("token:w")).map(|e| e.source),
            Some(ToolSource::Builtin)
        );
        // Approval: the pending entry goes and the live one changes; that is announced.
        catalog.set_pending("x", Vec::new());
        assert!(!rx.has_changed().unwrap_or(true));
        catalog.upsert(described("x", ToolSource::Stored, "v2"));
        assert!(
            rx.has_changed().unwrap_or(false),
            "approval was not announced"
        );
    }

    #[test]
    fn pages_are_kept_per_view_and_never_across_a_change() {
        let catalog = Catalog::new(SchemaProfile::AsAuthored);
        let admin_only = |name: &str| {
            let mut e = tool(name, ToolSource::Builtin);
            e.scope = Scope::Admin;
            e
        };
        catalog.replace(
            ToolSource::Builtin,
            vec![tool("a", ToolSource::Builtin), admin_only("b")],
        );
        catalog.replace(
            ToolSource::Stored,
            (0..5)
                .map(|i| tool(&format!("s{i}"), ToolSource::Stored))
                .collect(),
        );
        let snap = catalog.snapshot();
        let caller = |s: Scope| s == Scope::Call;
        let admin = |_: Scope| true;
        let names = |p: &crate::catalog::pages::Page| -> Vec<String> {
            p.tools.iter().map(|t| t.name.to_string()).collect()
        };
        let first = snap.page(None, caller, 0, 3).unwrap();
        assert_eq!(names(&first), ["a", "s0", "s1"]);
        assert!(first.more);
        // The same view again: the kept page.
        assert!(Arc::ptr_eq(&first, &snap.page(None, caller, 0, 3).unwrap()));
        // Another scope set sees another page.
        let admins = snap.page(Some("token:root"), admin, 0, 3).unwrap();
        assert_eq!(names(&admins), ["a", "b", "s0"]);
        // The last page says nothing follows; past the end is no page.
        let last = snap.page(None, caller, 3, 3).unwrap();
        assert_eq!(names(&last), ["s2", "s3", "s4"]);
        assert!(!last.more);
        assert!(
            snap.page(None, caller, 6, 3)
                .is_some_and(|p| p.tools.is_empty())
        );
        assert!(snap.page(None, caller, 7, 3).is_none());
        // An author with a pending version sees its own view, never another's kept page.
        catalog.set_pending(
            "s0",
            vec![(
                Arc::from("token:w"),
                described("s0", ToolSource::Stored, "v2"),
            )],
        );
        let snap = catalog.snapshot();
        let own = snap.page(Some("token:w"), caller, 0, 3).unwrap();
        assert_eq!(own.tools[1].description.as_deref(), Some("v2"));
        let everyone = snap.page(Some("token:other"), caller, 0, 3).unwrap();
        assert_eq!(everyone.tools[1].description.as_deref(), Some("d"));
        // A change publishes a new snapshot, with no page kept.
        catalog.upsert(described("s0", ToolSource::Stored, "v3"));
        let page = catalog.snapshot().page(None, caller, 0, 3).unwrap();
        assert_eq!(page.tools[1].description.as_deref(), Some("v3"));
    }

    #[test]
    fn concurrent_sources_never_publish_a_stale_merge() {
        // Two writers of different sources race; whatever the interleaving, the last published
        // snapshot holds both writers' last lists.
        let catalog = Arc::new(Catalog::new(SchemaProfile::AsAuthored));
        let writers: Vec<_> = [ToolSource::Manifest, ToolSource::Stored]
            .into_iter()
            .map(|source| {
                let catalog = catalog.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let name = format!("{}-{i}", source.as_str());
                        catalog.replace(source, vec![tool(&name, source)]);
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(names(&catalog), ["manifest-199", "stored-199"]);
    }
}

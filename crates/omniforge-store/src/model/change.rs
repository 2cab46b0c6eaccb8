//! The change feed's data: which stored things changed since a sequence number.
//!
//! Every committed write of a tool, secret, grant, resource, resource template or prompt gets the next
//! sequence number (`seq`) of the store's one change counter and one [`Change`] row naming what
//! it changed. A reader remembers the `seq` it has seen and asks for what came after it
//! ([`ToolStore::changes_since`](crate::ToolStore::changes_since)); it re-reads each changed
//! key (a key that is gone was deleted). The store keeps only the newest changes; a reader
//! that fell further behind is told to reload whole kinds ([`ChangeSet::reload`]).

use std::fmt;

/// What kind of stored thing a change is about; the key of a [`Change`] is that thing's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A tool: created, new version, rollback, enabled or disabled, purged. Key: the tool name.
    Tool,
    /// A stored resource: written or deleted. Key: its URI.
    Resource,
    /// A stored resource template: written or deleted. Key: its URI template.
    ResourceTemplate,
    /// A stored prompt: written or deleted. Key: its name.
    Prompt,
    /// A secret: set or deleted. Key: its name (never its value).
    Secret,
    /// The secret grants of a tool's versions: granted or revoked, or removed with their secret
    /// or an approval that granted. Key: the tool name (re-read its grants).
    Grant,
    /// A durable task: created, its status or pending input changed, cancelled. Key: the task
    /// id (the replica running it re-reads it, e.g. to stop a cancelled task).
    Task,
}

impl ChangeKind {
    /// Every kind, in a fixed order.
    pub const ALL: [ChangeKind; 7] = [
        ChangeKind::Tool,
        ChangeKind::Resource,
        ChangeKind::ResourceTemplate,
        ChangeKind::Prompt,
        ChangeKind::Secret,
        ChangeKind::Grant,
        ChangeKind::Task,
    ];

    /// The stored spelling: `tool`, `resource`, `resource_template`, `prompt`, `secret`,
    /// `grant`, `task`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Tool => "tool",
            ChangeKind::Resource => "resource",
            ChangeKind::ResourceTemplate => "resource_template",
            ChangeKind::Prompt => "prompt",
            ChangeKind::Secret => "secret",
            ChangeKind::Grant => "grant",
            ChangeKind::Task => "task",
        }
    }

    /// The kind a stored spelling names, if any.
    pub fn parse(s: &str) -> Option<ChangeKind> {
        ChangeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether the kind is content (resources, resource templates, prompts), which the server
    /// serves apart from tools.
    pub fn is_content(self) -> bool {
        matches!(
            self,
            ChangeKind::Resource | ChangeKind::ResourceTemplate | ChangeKind::Prompt
        )
    }
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One committed change: the thing `key` of `kind` was written or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its place in the store's change order (1, 2, ...; commit order).
    pub seq: u64,
    /// What kind of thing changed.
    pub kind: ChangeKind,
    /// Which one: tool name, resource URI, URI template, prompt name or secret name.
    pub key: String,
    /// When it was committed, unix milliseconds (UTC), by the writer's clock.
    pub at_ms: i64,
}

/// What changed after a given sequence number, as of one consistent moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangeSet {
    /// The store's high-water mark at that moment: the `seq` of its newest change. Give it to
    /// the next [`changes_since`](crate::ToolStore::changes_since).
    pub seq: u64,
    /// Kinds of which some changes after the given number are no longer kept (pruned, or the
    /// database is older than the number, as after a restore from a backup): re-read everything
    /// of these kinds. Sorted, without repeats; their changes are left out of
    /// [`changes`](ChangeSet::changes).
    pub reload: Vec<ChangeKind>,
    /// The kept changes of the other kinds, one per `(kind, key)` (its newest), oldest first.
    pub changes: Vec<Change>,
}

impl ChangeSet {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.reload.is_empty() && self.changes.is_empty()
    }

    /// Whether everything of `kind` must be re-read.
    pub fn reloads(&self, kind: ChangeKind) -> bool {
        self.reload.contains(&kind)
    }

    /// Whether anything of `kind` changed: a reload or at least one key.
    pub fn touches(&self, kind: ChangeKind) -> bool {
        self.reloads(kind) || self.changes.iter().any(|c| c.kind == kind)
    }

    /// The changed keys of `kind`, oldest change first (empty when the kind is reloaded).
    pub fn keys(&self, kind: ChangeKind) -> impl Iterator<Item = &str> {
        self.changes
            .iter()
            .filter(move |c| c.kind == kind)
            .map(|c| c.key.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_their_spelling() {
        for kind in ChangeKind::ALL {
            assert_eq!(ChangeKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ChangeKind::parse("tools"), None);
        let content: Vec<_> = ChangeKind::ALL
            .into_iter()
            .filter(|k| k.is_content())
            .collect();
        assert_eq!(
            content,
            [
                ChangeKind::Resource,
                ChangeKind::ResourceTemplate,
                ChangeKind::Prompt
            ]
        );
    }

    #[test]
    fn set_queries() {
        let set = ChangeSet {
            seq: 9,
            reload: vec![ChangeKind::Secret],
            changes: vec![
                Change {
                    seq: 7,
                    kind: ChangeKind::Tool,
                    key: "a".into(),
                    at_ms: 1,
                },
                Change {
                    seq: 9,
                    kind: ChangeKind::Tool,
                    key: "b".into(),
                    at_ms: 2,
                },
            ],
        };
        assert!(!set.is_empty() && ChangeSet::default().is_empty());
        assert_eq!(set.keys(ChangeKind::Tool).collect::<Vec<_>>(), ["a", "b"]);
        assert!(set.touches(ChangeKind::Secret) && set.reloads(ChangeKind::Secret));
        assert!(!set.touches(ChangeKind::Prompt));
    }
}

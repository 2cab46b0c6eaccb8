//! The audit log's data: who acts ([`Actor`]), and one [`AuditRecord`] per authoring or admin
//! action, written in the same transaction as the action.

use std::fmt;

use super::JsonObject;
use crate::error::StoreError;

/// The longest principal, in bytes.
pub const MAX_PRINCIPAL_BYTES: usize = 512;

/// Who performs a write, and what else the audit record should say about it. Every write that
/// is an authoring or admin action takes one, so that its audit record cannot be skipped.
///
/// `principal` is the server's principal string (issue 16's namespace: `token:NAME`,
/// `oauth:ISSUER|SUB`, `stdio`, `cli:USER`, `anonymous`); the store only checks that it is 1 to
/// [`MAX_PRINCIPAL_BYTES`] bytes without control characters. `context` is merged into each
/// record's [`detail`](AuditRecord::detail) (for example `{"via": "console"}`); it must never hold
/// a secret value or a token.
#[derive(Debug, Clone, PartialEq)]
pub struct Actor {
    /// Who acts.
    pub principal: String,
    /// Extra facts for the record's detail; the store's own keys win on a clash.
    pub context: JsonObject,
}

impl Actor {
    /// An actor with no extra context.
    pub fn new(principal: impl Into<String>) -> Actor {
        Actor {
            principal: principal.into(),
            context: JsonObject::new(),
        }
    }

    /// The store itself, for what it does on its own (encrypting plain-text secrets at open).
    pub fn store() -> Actor {
        Actor::new(STORE_PRINCIPAL)
    }

    /// The same actor with `key` set to `value` in its context.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Actor {
        self.context.insert(key.into(), value.into());
        self
    }

    /// Checks the principal.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] with field `actor.principal`.
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_principal("actor.principal", &self.principal)
    }
}

/// The principal of the store's own actions: `omniforge`.
pub const STORE_PRINCIPAL: &str = "omniforge";

/// Checks a principal string: 1 to [`MAX_PRINCIPAL_BYTES`] bytes, no control characters.
///
/// # Errors
/// [`StoreError::Invalid`] naming `field`.
pub fn validate_principal(field: &str, principal: &str) -> Result<(), StoreError> {
    let reason = if principal.is_empty() {
        "must not be empty"
    } else if principal.len() > MAX_PRINCIPAL_BYTES {
        "is longer than 512 bytes"
    } else if principal.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(StoreError::Invalid {
        field: field.to_owned(),
        reason: reason.to_owned(),
    })
}

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuditAction {
    /// A tool (with its first version), resource, template or prompt was created.
    Create,
    /// A tool got a new version; a resource, template or prompt was rewritten.
    Update,
    /// A tool's current version was moved to an older (or newer) live version.
    Rollback,
    /// A tool (purged), secret, resource, template or prompt was deleted.
    Delete,
    /// A tool was enabled.
    Enable,
    /// A tool was disabled.
    Disable,
    /// A pending version was approved (it went live).
    Approve,
    /// A pending or draft version was rejected (or superseded).
    Reject,
    /// A secret's value was set.
    Set,
    /// A secret was granted to a tool version.
    Grant,
    /// A grant was revoked.
    Revoke,
    /// A pack was imported (one summary record besides the records of what it changed).
    Import,
    /// Every secret was re-encrypted under the keyring's current key.
    RotateKey,
    /// Secrets stored in plain text (before encryption at rest) were encrypted.
    Encrypt,
    /// Audit records older than a time were deleted (retention).
    Prune,
}

impl AuditAction {
    /// Every action, in a fixed order.
    pub const ALL: [AuditAction; 15] = [
        AuditAction::Create,
        AuditAction::Update,
        AuditAction::Rollback,
        AuditAction::Delete,
        AuditAction::Enable,
        AuditAction::Disable,
        AuditAction::Approve,
        AuditAction::Reject,
        AuditAction::Set,
        AuditAction::Grant,
        AuditAction::Revoke,
        AuditAction::Import,
        AuditAction::RotateKey,
        AuditAction::Encrypt,
        AuditAction::Prune,
    ];

    /// The stored spelling: the variant in snake case (`create`, `rotate_key`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Create => "create",
            AuditAction::Update => "update",
            AuditAction::Rollback => "rollback",
            AuditAction::Delete => "delete",
            AuditAction::Enable => "enable",
            AuditAction::Disable => "disable",
            AuditAction::Approve => "approve",
            AuditAction::Reject => "reject",
            AuditAction::Set => "set",
            AuditAction::Grant => "grant",
            AuditAction::Revoke => "revoke",
            AuditAction::Import => "import",
            AuditAction::RotateKey => "rotate_key",
            AuditAction::Encrypt => "encrypt",
            AuditAction::Prune => "prune",
        }
    }

    /// The action a stored spelling names.
    pub fn parse(s: &str) -> Option<AuditAction> {
        AuditAction::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl fmt::Display for AuditAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of thing an action was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuditObject {
    /// A tool; grants and revocations are about the tool version they name.
    Tool,
    /// A secret (never its value).
    Secret,
    /// A stored resource, by URI.
    Resource,
    /// A stored resource template, by URI template.
    ResourceTemplate,
    /// A stored prompt.
    Prompt,
    /// A pack import (name `pack`).
    Pack,
    /// The secret keyring (name: the current key id).
    Keyring,
    /// The audit log itself (name `audit_log`), for retention prunes.
    AuditLog,
}

impl AuditObject {
    /// Every kind, in a fixed order.
    pub const ALL: [AuditObject; 8] = [
        AuditObject::Tool,
        AuditObject::Secret,
        AuditObject::Resource,
        AuditObject::ResourceTemplate,
        AuditObject::Prompt,
        AuditObject::Pack,
        AuditObject::Keyring,
        AuditObject::AuditLog,
    ];

    /// The stored spelling: `tool`, `secret`, `resource`, `resource_template`, `prompt`,
    /// `pack`, `keyring`, `audit_log`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditObject::Tool => "tool",
            AuditObject::Secret => "secret",
            AuditObject::Resource => "resource",
            AuditObject::ResourceTemplate => "resource_template",
            AuditObject::Prompt => "prompt",
            AuditObject::Pack => "pack",
            AuditObject::Keyring => "keyring",
            AuditObject::AuditLog => "audit_log",
        }
    }

    /// The kind a stored spelling names.
    pub fn parse(s: &str) -> Option<AuditObject> {
        AuditObject::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl fmt::Display for AuditObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One audit record, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// Its number: 1, 2, ... in commit order, never reused (a prune leaves a gap at the start).
    pub id: u64,
    /// When the action committed, unix milliseconds (UTC), by the writer's clock.
    pub at_ms: i64,
    /// Who acted ([`Actor::principal`]).
    pub principal: String,
    /// What was done.
    pub action: AuditAction,
    /// What kind of thing it was done to.
    pub object: AuditObject,
    /// Its name: tool name, secret name, URI, URI template, prompt name, `pack`, key id,
    /// `audit_log`.
    pub name: String,
    /// The tool version the action concerns, if any.
    pub version: Option<u32>,
    /// SHA-256 (lowercase hex) of the canonical JSON of the new definition (see
    /// [`digest`](crate::digest)), for actions that write or select one: a tool version
    /// (create, update, rollback, approve, reject), a resource, template or prompt. Never of
    /// a secret value.
    pub definition_sha256: Option<String>,
    /// Free-form facts (never a secret value): the [`Actor::context`], plus what the store
    /// adds per action (a rollback's `from`, a rejection's `reason`, an import's `changed`, ...).
    pub detail: JsonObject,
}

/// What a write appends to the audit log: everything but the id, time and principal, which the
/// backend's write sets. Backend-neutral; built by each write, in the order of its effects.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AuditEntry {
    pub(crate) action: AuditAction,
    pub(crate) object: AuditObject,
    pub(crate) name: String,
    pub(crate) version: Option<u32>,
    pub(crate) definition_sha256: Option<String>,
    pub(crate) detail: JsonObject,
}

impl AuditEntry {
    /// An entry for `action` on `object` `name`.
    pub(crate) fn new(action: AuditAction, object: AuditObject, name: &str) -> AuditEntry {
        AuditEntry {
            action,
            object,
            name: name.to_owned(),
            version: None,
            definition_sha256: None,
            detail: JsonObject::new(),
        }
    }

    /// With the tool version it concerns.
    pub(crate) fn version(mut self, version: u32) -> AuditEntry {
        self.version = Some(version);
        self
    }

    /// With the hash of the new definition.
    pub(crate) fn hash(mut self, sha256: String) -> AuditEntry {
        self.definition_sha256 = Some(sha256);
        self
    }

    /// With `key` set in the detail.
    pub(crate) fn detail(mut self, key: &str, value: impl Into<serde_json::Value>) -> AuditEntry {
        self.detail.insert(key.to_owned(), value.into());
        self
    }

    /// The detail as stored: the actor's context, then the entry's own keys, which win.
    pub(crate) fn detail_for(&self, actor: &Actor) -> JsonObject {
        let mut detail = actor.context.clone();
        for (k, v) in &self.detail {
            detail.insert(k.clone(), v.clone());
        }
        detail
    }
}

/// Which audit records to read: every given condition must hold. Newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only records at or after this time, unix milliseconds.
    pub since_ms: Option<i64>,
    /// Only records of this principal.
    pub principal: Option<String>,
    /// Only records about this object (kind and name).
    pub object: Option<(AuditObject, String)>,
    /// Only records with an id below this one (the next page after a page that ended there).
    pub before_id: Option<u64>,
    /// At most this many records; `0` returns none.
    pub limit: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Some(a));
        }
        for o in AuditObject::ALL {
            assert_eq!(AuditObject::parse(o.as_str()), Some(o));
        }
        assert_eq!(AuditAction::parse("Create"), None);
    }

    #[test]
    fn principals_are_checked() {
        assert!(Actor::new("token:alice").validate().is_ok());
        assert!(
            Actor::new("oauth:https://id.example|1234")
                .validate()
                .is_ok()
        );
        for bad in [String::new(), "a\nb".into(), "x".repeat(513)] {
            assert!(
                matches!(
                    Actor::new(bad.clone()).validate(),
                    Err(StoreError::Invalid { .. })
                ),
                "{bad:?}"
            );
        }
    }
}

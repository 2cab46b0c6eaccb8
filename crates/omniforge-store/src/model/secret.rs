//! Secrets as they may be shown ([`SecretInfo`]), their values ([`SecretValue`]), and the
//! grants that let one tool version read them ([`Grant`], [`SecretRequest`]).

use std::fmt;

/// What may be shown of a secret: its name and when it was last set, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretInfo {
    /// The secret's name (an environment variable name).
    pub name: String,
    /// When its value was last set, milliseconds since the Unix epoch.
    pub updated_at_ms: i64,
    /// The id of the key that seals its value; `None` for a value an older build stored in
    /// plain text, not sealed yet (no keyring has opened the store since).
    pub key_id: Option<String>,
}

/// A secret's value. Its `Debug` output is redacted so that it cannot leak through logs by
/// accident; read it with [`expose`](SecretValue::expose).
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> SecretValue {
        SecretValue(value.into())
    }

    /// The plain value.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The plain value, consuming the wrapper.
    pub fn into_inner(self) -> String {
        self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// A secret granted to one exact tool version by an admin (issue 11). A run of that version gets
/// the secret; other versions of the tool do not (a new version starts without grants, and a
/// rollback uses the target version's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The secret's name.
    pub secret: String,
    /// The tool's name.
    pub tool: String,
    /// The version granted.
    pub version: u32,
    /// The principal that granted it.
    pub granted_by: String,
    /// When, unix milliseconds (UTC).
    pub granted_at_ms: i64,
}

/// One secret a tool version declares, and whether it may have it: granted, or a pending
/// request until an admin grants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRequest {
    /// The declared secret name.
    pub secret: String,
    /// Whether a secret of that name is set.
    pub exists: bool,
    /// The grant, if an admin made one; `None` means the request is pending.
    pub grant: Option<Grant>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_debug_is_redacted() {
        let s = SecretValue::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }
}

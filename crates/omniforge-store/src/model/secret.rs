//! Secrets as they may be shown ([`SecretInfo`]) and their values ([`SecretValue`]).

use std::fmt;

/// What may be shown of a secret: its name and when it was last set, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretInfo {
    /// The secret's name (an environment variable name).
    pub name: String,
    /// When its value was last set, milliseconds since the Unix epoch.
    pub updated_at_ms: i64,
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

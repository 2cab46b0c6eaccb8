//! The stored data: tools, their immutable versions, call records and secret values, plus the
//! name rules. Plain data with no database or MCP types.

use std::fmt;

use crate::error::{NameKind, StoreError};

/// A JSON object, as tool input and output schemas are.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// The longest tool or secret name, in characters (all allowed characters are ASCII).
pub const MAX_NAME_LEN: usize = 64;

/// Checks a tool name: 1 to [`MAX_NAME_LEN`] characters from `[a-zA-Z0-9_-]`.
///
/// Names are case-sensitive: `Fetch` and `fetch` are two tools.
///
/// # Errors
/// [`StoreError::InvalidName`] with [`NameKind::Tool`].
pub fn validate_tool_name(name: &str) -> Result<(), StoreError> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind: NameKind::Tool,
            name: name.to_owned(),
        })
    }
}

/// Checks a secret name: 1 to [`MAX_NAME_LEN`] characters from `[a-zA-Z0-9_]`, not starting with
/// a digit, so that every secret name is also a portable environment variable name.
///
/// # Errors
/// [`StoreError::InvalidName`] with [`NameKind::Secret`].
pub fn validate_secret_name(name: &str) -> Result<(), StoreError> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind: NameKind::Secret,
            name: name.to_owned(),
        })
    }
}

/// A tool as a whole: its switches and which version is current. Its code lives in
/// [`ToolVersion`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// The unique name (see [`validate_tool_name`]).
    pub name: String,
    /// Disabled tools keep their versions but are left out of [`list_enabled`](crate::ToolStore::list_enabled).
    pub enabled: bool,
    /// The number of the version that runs.
    pub current_version: u32,
    /// When the tool was created, unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// When the tool last changed (new version, rollback, enable/disable), unix milliseconds (UTC).
    pub updated_at_ms: i64,
}

/// A tool together with its current version, as the catalog needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTool {
    /// The tool.
    pub tool: Tool,
    /// Its current version (`current.number == tool.current_version`).
    pub current: ToolVersion,
}

/// One immutable version of a tool, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolVersion {
    /// The tool's name.
    pub tool: String,
    /// 1 for the version that created the tool, then one more than the highest existing number
    /// (numbers are never reused while the tool exists, even after a rollback).
    pub number: u32,
    /// When the version was written, unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// Everything else, exactly as given to [`create_tool`](crate::ToolStore::create_tool) or
    /// [`add_version`](crate::ToolStore::add_version).
    pub spec: NewVersion,
}

/// The content of a version: everything but its tool name, number and creation time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    /// Human-readable display name (MCP `title`); `None` leaves it to the client.
    pub title: Option<String>,
    /// What the tool does, for the model (MCP `description`).
    pub description: String,
    /// JSON Schema of the arguments (MCP `inputSchema`).
    pub input_schema: JsonObject,
    /// JSON Schema of structured results (MCP `outputSchema`), if the tool declares one.
    pub output_schema: Option<JsonObject>,
    /// MCP tool annotations (hints).
    pub annotations: Annotations,
    /// The language the code runs in.
    pub runtime: Runtime,
    /// The script source.
    pub code: String,
    /// PEP 508 requirement strings as the author wrote them (for example `httpx>=0.27`). The store
    /// checks only that each is a non-empty single line; resolving them is the runner's job.
    pub dependencies: Vec<String>,
    /// Resource limits for one call.
    pub limits: Limits,
    /// The resolved, hash-pinned requirements text the environment was built from.
    pub lock: String,
    /// Identifier of the built environment; versions with identical locks share one.
    pub env_id: String,
    /// Names of the secrets the code needs (see [`validate_secret_name`]); may be empty.
    pub secrets: Vec<String>,
    /// Who wrote the version: the bearer token's name, or `stdio`.
    pub author: String,
}

/// MCP tool annotations. Each hint is optional; `None` means "not said".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Annotations {
    /// The tool does not modify its environment.
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no additional effect.
    pub idempotent_hint: Option<bool>,
    /// The tool interacts with an open world of external entities.
    pub open_world_hint: Option<bool>,
}

/// Resource limits for one call of a version. The store keeps them; the runner enforces them.
///
/// Both numbers must fit in an `i64` (SQLite integers are signed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit for one call, milliseconds.
    pub timeout_ms: u64,
    /// Memory limit for one call, bytes.
    pub memory_bytes: u64,
    /// Whether the script may use the network.
    pub network: bool,
}

/// The language a version's code runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Runtime {
    /// CPython, with dependencies installed by the runner.
    Python,
}

impl Runtime {
    /// The stored spelling: `python`.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Python => "python",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Runtime> {
        match s {
            "python" => Some(Runtime::Python),
            _ => None,
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finished call of a stored tool, for the call log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// The tool's name.
    pub tool: String,
    /// The version that ran.
    pub version: u32,
    /// When the call started, unix milliseconds (UTC).
    pub started_at_ms: i64,
    /// How long it took, milliseconds (at most `i64::MAX`).
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: CallOutcome,
    /// Bytes of output returned to the client (at most `i64::MAX`).
    pub bytes_out: u64,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The script succeeded.
    Ok,
    /// The call failed before or around the script (bad arguments, environment build, output
    /// too large, ...).
    Error,
    /// The script exited with this non-zero status.
    Exit(i32),
    /// The script was killed at its time limit.
    Timeout,
    /// The client cancelled the call.
    Cancelled,
}

impl fmt::Display for CallOutcome {
    /// `ok`, `error`, `exit N`, `timeout` or `cancelled`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallOutcome::Ok => f.write_str("ok"),
            CallOutcome::Error => f.write_str("error"),
            CallOutcome::Exit(code) => write!(f, "exit {code}"),
            CallOutcome::Timeout => f.write_str("timeout"),
            CallOutcome::Cancelled => f.write_str("cancelled"),
        }
    }
}

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

    /// Each case: the name and whether it is valid as a tool name and as a secret name.
    const NAMES: &[(&str, bool, bool)] = &[
        ("fetch_weather", true, true),
        ("fetch-weather", true, false),
        ("A1", true, true),
        ("9lives", true, false),
        ("_private", true, true),
        ("", false, false),
        ("a b", false, false),
        ("a.b", false, false),
        ("a/b", false, false),
        ("héllo", false, false),
        ("tab\t", false, false),
        ("semi;colon", false, false),
    ];

    #[test]
    fn name_rules() {
        let long_ok = "x".repeat(MAX_NAME_LEN);
        let too_long = "x".repeat(MAX_NAME_LEN + 1);
        let cases = NAMES
            .iter()
            .map(|&(n, t, s)| (n.to_owned(), t, s))
            .chain([(long_ok, true, true), (too_long, false, false)]);
        for (name, tool_ok, secret_ok) in cases {
            assert_eq!(
                validate_tool_name(&name).is_ok(),
                tool_ok,
                "tool name {name:?}"
            );
            assert_eq!(
                validate_secret_name(&name).is_ok(),
                secret_ok,
                "secret name {name:?}"
            );
        }
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = SecretValue::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn outcome_display() {
        let shown: Vec<String> = [
            CallOutcome::Ok,
            CallOutcome::Error,
            CallOutcome::Exit(3),
            CallOutcome::Timeout,
            CallOutcome::Cancelled,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(shown, ["ok", "error", "exit 3", "timeout", "cancelled"]);
    }
}

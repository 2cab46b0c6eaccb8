//! The call log: one [`CallRecord`] per finished call of a stored tool.

use std::fmt;

/// The longest [`CallRecord::error`] kept, in bytes; a longer one is cut at a character boundary
/// when it is recorded.
pub const MAX_CALL_ERROR_BYTES: usize = 2048;

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
    /// Who called: the bearer token's name, `stdio` or `cli`. `None` in rows recorded before the
    /// store kept it.
    pub principal: Option<String>,
    /// Why the call failed, in a few words (never a secret value: the caller redacts); `None`
    /// when it succeeded or nothing was said. Kept up to [`MAX_CALL_ERROR_BYTES`].
    pub error: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

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

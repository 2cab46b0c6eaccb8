//! The call log: one [`CallRecord`] per finished call of any tool (built-in, manifest or
//! stored), and the hourly statistics kept beside it ([`HourStats`], [`ToolActivity`]).

use std::fmt;

/// The longest [`CallRecord::error`] kept, in bytes; a longer one is cut at a character boundary
/// when it is recorded.
pub const MAX_CALL_ERROR_BYTES: usize = 2048;

/// The longest [`CallRecord::arguments_text`] and [`CallRecord::result_text`] kept, in bytes
/// (16 KiB each); longer ones are cut at a character boundary when recorded. With the default
/// 10,000 rows, the log's texts stay under about 320 MiB at worst.
pub const MAX_CALL_TEXT_BYTES: usize = 16 * 1024;

/// The longest tool name the call log takes (manifest tool names are not stored tool names).
pub const MAX_CALL_TOOL_BYTES: usize = 256;

/// Where a called tool comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CallSource {
    /// A built-in `omniforge_*` tool.
    BuiltIn,
    /// A tool of a forge manifest (a Connect RPC).
    Manifest,
    /// A stored script tool; its calls name the version that ran.
    Stored,
}

impl CallSource {
    /// Every source, in a fixed order.
    pub const ALL: [CallSource; 3] = [
        CallSource::BuiltIn,
        CallSource::Manifest,
        CallSource::Stored,
    ];

    /// The stored spelling: `builtin`, `manifest`, `stored`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallSource::BuiltIn => "builtin",
            CallSource::Manifest => "manifest",
            CallSource::Stored => "stored",
        }
    }

    /// The source a stored spelling names.
    pub fn parse(s: &str) -> Option<CallSource> {
        CallSource::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for CallSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A digest of a call's arguments: enough to tell calls with the same arguments apart from
/// others without keeping the arguments (see [`digest::arguments_digest`](crate::digest::arguments_digest)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentsDigest {
    /// SHA-256 of the arguments' canonical JSON, lowercase hex (64 characters).
    pub sha256: String,
    /// Bytes of that canonical JSON.
    pub bytes: u64,
}

/// A text kept with a call (redacted by the caller), possibly cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedText {
    /// The text, at most [`MAX_CALL_TEXT_BYTES`] once recorded.
    pub text: String,
    /// Bytes of the whole text before it was cut (`text.len()` when it was not).
    pub total_bytes: u64,
}

impl CapturedText {
    /// A whole text.
    pub fn new(text: impl Into<String>) -> CapturedText {
        let text = text.into();
        CapturedText {
            total_bytes: text.len() as u64,
            text,
        }
    }

    /// Whether the text was cut.
    pub fn is_cut(&self) -> bool {
        self.total_bytes > self.text.len() as u64
    }
}

/// One finished call, for the call log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// The tool's name.
    pub tool: String,
    /// Where the tool comes from.
    pub source: CallSource,
    /// The version that ran: set for [`CallSource::Stored`] calls, `None` for the others.
    pub version: Option<u32>,
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
    /// A digest of the arguments as received; `None` if not given (and in rows recorded before
    /// the store kept it).
    pub arguments: Option<ArgumentsDigest>,
    /// The arguments as the console may show them, already redacted by the caller (secret
    /// values of other principals replaced); cut to [`MAX_CALL_TEXT_BYTES`].
    pub arguments_text: Option<CapturedText>,
    /// The result as the console may show it, already redacted by the caller; cut to
    /// [`MAX_CALL_TEXT_BYTES`].
    pub result_text: Option<CapturedText>,
}

/// A call as read back from the log, with its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedCall {
    /// Its number in the log: grows with every recorded call.
    pub id: u64,
    /// The call.
    pub call: CallRecord,
}

/// Which logged calls to read: every given condition must hold. Newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallFilter {
    /// Only calls of this tool name.
    pub tool: Option<String>,
    /// Only calls of tools from this source.
    pub source: Option<CallSource>,
    /// Only calls made by this principal.
    pub principal: Option<String>,
    /// Only calls with an id below this one (the next page after a page that ended there).
    pub before_id: Option<u64>,
    /// At most this many calls; `0` returns none.
    pub limit: u32,
}

/// The calls of one hour (of one tool, or of all tools), from the hourly statistics, which
/// outlive the call log's row limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourStats {
    /// The hour's start, unix milliseconds (UTC), a multiple of 3,600,000.
    pub hour_start_ms: i64,
    /// Calls that started in the hour.
    pub calls: u64,
    /// Of them, calls that failed ([`CallOutcome::is_error`]).
    pub errors: u64,
    /// Median duration, milliseconds: the upper bound of the histogram bucket that holds it,
    /// never more than `max_ms` (see [`stats`](crate::stats) for the buckets).
    pub p50_ms: u64,
    /// 99th percentile duration, milliseconds, as `p50_ms`.
    pub p99_ms: u64,
    /// The longest call, milliseconds.
    pub max_ms: u64,
}

/// One tool's calls over a period, from the hourly statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolActivity {
    /// The tool's name.
    pub tool: String,
    /// Its source.
    pub source: CallSource,
    /// Calls in the period.
    pub calls: u64,
    /// Of them, calls that failed.
    pub errors: u64,
    /// When the latest of them started, unix milliseconds (UTC).
    pub last_call_ms: i64,
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

impl CallOutcome {
    /// Whether the call failed: [`Error`](CallOutcome::Error), [`Exit`](CallOutcome::Exit) or
    /// [`Timeout`](CallOutcome::Timeout). A cancelled call was the client's choice, not an
    /// error.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            CallOutcome::Error | CallOutcome::Exit(_) | CallOutcome::Timeout
        )
    }
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

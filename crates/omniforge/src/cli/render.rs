//! Results and times as text for people.

use std::time::{Duration, SystemTime};

use anyhow::{Result, bail};
use omniforge_server::{CallOutput, Outcome};

/// Prints the text items of a tool-call result (the built-ins' and the tools' own), one per
/// line.
///
/// # Errors
/// The result is an error result (`isError`), so that the command exits with status 1.
pub(super) fn call_result(result: &CallOutput) -> Result<()> {
    for text in &result.texts {
        out!("{text}");
    }
    if result.is_error {
        bail!("the call ended with isError")
    }
    Ok(())
}

/// Prints what a built-in operation said.
///
/// # Errors
/// It refused, so that the command exits with status 1.
pub(super) fn outcome(outcome: &Outcome) -> Result<()> {
    out!("{}", outcome.text);
    if !outcome.ok {
        bail!("the call ended with isError")
    }
    Ok(())
}

/// A time stored as unix milliseconds, as `2025-12-01 15:35:02 UTC` (a time before 1970 or
/// past 9999 shows the raw number).
pub(super) fn time(unix_ms: i64) -> String {
    let Ok(ms) = u64::try_from(unix_ms) else {
        return format!("{unix_ms} ms");
    };
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    // `2025-12-01T15:35:02Z`
    let rfc3339 = humantime::format_rfc3339_seconds(at).to_string();
    match rfc3339.strip_suffix('Z') {
        Some(text) if text.len() == 19 => format!("{} UTC", text.replacen('T', " ", 1)),
        _ => format!("{unix_ms} ms"),
    }
}

/// The first line of a description.
pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_dates() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(time(1_764_603_302_123), "2025-12-01 15:35:02 UTC");
        assert_eq!(time(-5), "-5 ms");
    }
}

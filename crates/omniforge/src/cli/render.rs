//! Results and times as text for people.

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

/// A time stored as unix milliseconds, as `2025-12-01 15:35:02 UTC` (the console's renderer).
pub(super) use omniforge_server::utc_time as time;

/// The first line of a description.
pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

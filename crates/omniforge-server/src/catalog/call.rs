//! The one call trait every tool source implements, and what a call is given and ends in.
//! The catalog routes through [`ToolCall`] only: it never looks into a source's types.

use futures::future::{BoxFuture, Either, Ready};
use rmcp::model::{CallToolResult, JsonObject};

use std::time::{SystemTime, UNIX_EPOCH};

use omniforge_store::{CallOutcome, CallRecord, CallSource};

use crate::context::actor::Via;
use crate::context::request::RequestCx;
use crate::error::CallError;

/// What a call ends in.
pub(crate) type CallResult = Result<CallToolResult, CallError>;

/// A call in progress: answered at once ([`ready`]) or running ([`running`]). An answer that is
/// ready costs no allocation for its future (the built-ins on the hot path).
pub(crate) type CallFuture<'a> = Either<Ready<CallResult>, BoxFuture<'a, CallResult>>;

/// The most bytes of a failed call's reason the call log keeps.
const MAX_REASON_BYTES: usize = 300;

/// A short reason for a failed call, for the call log's `error` (issue 11, finding 12): the
/// error's text, or the last non-empty line of an `isError` result's first text (a traceback's
/// exception line, `[exit 1]`, `[timeout]`), cut to a few hundred bytes. `None` for a success.
/// A stored call's result is already redacted when this reads it.
pub(crate) fn failure_reason(result: &CallResult) -> Option<String> {
    let text = match result {
        Err(error) => error.to_string(),
        Ok(r) if r.is_error == Some(true) => {
            let first = r
                .content
                .iter()
                .find_map(|c| c.as_text().map(|t| t.text.as_str()));
            let mut lines = first
                .unwrap_or("")
                .lines()
                .rev()
                .map(str::trim)
                .filter(|l| !l.is_empty());
            // A script's text ends in a marker (`[exit 1]`, `[timeout]`): keep the line before
            // it too (a traceback's exception line).
            let is_marker = |l: &str| l.starts_with('[') && l.ends_with(']');
            match (lines.next(), lines.next()) {
                (Some(last), Some(before)) if is_marker(last) && !is_marker(before) => {
                    format!("{before} {last}")
                }
                (Some(last), _) => last.to_owned(),
                (None, _) => "(an error result without text)".to_owned(),
            }
        }
        Ok(_) => return None,
    };
    let mut end = text.len().min(MAX_REASON_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(text[..end].to_owned())
}

/// An answer that is ready now.
pub(crate) fn ready<'a>(result: CallResult) -> CallFuture<'a> {
    Either::Left(futures::future::ready(result))
}

/// An answer that takes work.
pub(crate) fn running<'a>(work: impl Future<Output = CallResult> + Send + 'a) -> CallFuture<'a> {
    Either::Right(Box::pin(work))
}

/// One call of one entry: its checked arguments and who asks.
pub(crate) struct Call<'a> {
    /// The arguments, already checked against the entry's inputSchema.
    pub(crate) arguments: JsonObject,
    /// The request.
    pub(crate) cx: &'a RequestCx<'a>,
    /// Where the call came from.
    pub(crate) via: Via<'a>,
    /// The catalog the call was routed in (`omniforge_call_tool` routes in it again).
    pub(crate) catalog: &'a dyn Router,
}

/// How a tool is called. Every source implements it; the catalog routes through it only.
pub(crate) trait ToolCall: Send + Sync {
    /// Runs the call.
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a>;

    /// Checks `arguments` against the inputSchema the call loads itself, for an entry that
    /// holds none (a stored tool: its version is read from the store at call time). The
    /// default, for calls whose entry holds its schema, accepts them.
    ///
    /// # Errors
    /// [`CallError::InvalidArguments`], or what loading the schema ends in.
    fn check_arguments<'a>(
        &'a self,
        arguments: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, CallError>> {
        Box::pin(futures::future::ready(Ok(arguments)))
    }
}

/// Routes a call by name: what `omniforge_call_tool` and a script's `call_builtin` need of
/// the catalog.
pub(crate) trait Router: Send + Sync {
    /// Routes `name` with `arguments` for `cx`, come through `via`, as if called directly.
    fn route<'a>(
        &'a self,
        name: &'a str,
        arguments: JsonObject,
        cx: &'a RequestCx<'a>,
        via: Via<'a>,
    ) -> BoxFuture<'a, CallResult>;
}

/// The call log row of a built-in or manifest call that started at `started` (inline, or as
/// a task; a stored call records itself, with its version).
pub(crate) fn log_record(
    source: CallSource,
    tool: &str,
    started: SystemTime,
    result: &CallResult,
    principal: &str,
) -> CallRecord {
    let ms = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    };
    let outcome = match result {
        Ok(r) if r.is_error != Some(true) => CallOutcome::Ok,
        Err(CallError::Cancelled) => CallOutcome::Cancelled,
        _ => CallOutcome::Error,
    };
    let bytes_out = result.as_ref().map_or(0, |r| {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.len() as u64))
            .sum()
    });
    CallRecord {
        tool: tool.to_owned(),
        source,
        version: None,
        started_at_ms: ms(started),
        duration_ms: u64::try_from(ms(SystemTime::now()) - ms(started)).unwrap_or(0),
        outcome,
        bytes_out,
        principal: Some(principal.to_owned()),
        error: failure_reason(result),
        arguments: None,
        arguments_text: None,
        result_text: None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;

    use super::*;

    #[test]
    fn failure_reasons_are_short_and_name_the_failure() {
        let ok = CallToolResult::success(vec![ContentBlock::text("fine")]);
        assert_eq!(failure_reason(&Ok(ok)), None);
        let failed = CallToolResult::error(vec![ContentBlock::text(
            "Traceback (most recent call last):\n  File x\nValueError: bad net\n\n",
        )]);
        assert_eq!(
            failure_reason(&Ok(failed)).as_deref(),
            Some("ValueError: bad net")
        );
        let exited = CallToolResult::error(vec![ContentBlock::text(
            "[stderr] Traceback:\nValueError: bad net\n[exit 1]",
        )]);
        assert_eq!(
            failure_reason(&Ok(exited)).as_deref(),
            Some("ValueError: bad net [exit 1]")
        );
        assert_eq!(
            failure_reason(&Err(CallError::UnknownTool)).as_deref(),
            Some(CallError::UnknownTool.to_string().as_str())
        );
        let long = CallToolResult::error(vec![ContentBlock::text("é".repeat(1000))]);
        let reason = failure_reason(&Ok(long)).unwrap();
        assert!(reason.len() <= MAX_REASON_BYTES && reason.starts_with('é'));
    }
}

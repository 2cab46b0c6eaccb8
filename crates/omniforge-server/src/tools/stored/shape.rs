//! Result shaping: a finished run's output becomes the tool's result. A result given through
//! the helper module wins over stdout; with an outputSchema, stdout must be one JSON object
//! matching it; otherwise the prototype's text (stdout, `[stderr] ...`, `[exit N]`,
//! `[timeout]`), cut at the size cap with a resource link to the whole output.

use std::sync::Arc;

use base64::Engine as _;
use omniforge_script::{Exit, RunOutput, ScriptResult, prototype_text};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::context::request::RequestCx;
use crate::error::{InvalidContent, ResultError};
use crate::runs::redact::{redact_cut_tail, scrub};
use crate::schema::LazySchema;
use crate::tools::stored::kept::KeptOutputs;

/// The limits a run had, for the hints of a failed run's text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunLimits {
    /// Its time limit.
    pub(crate) timeout: std::time::Duration,
    /// Whether it could use the network.
    pub(crate) network: bool,
}

/// How results are shaped.
pub(crate) struct Shaper {
    /// Most bytes of text a call returns to the client; the rest is cut with a marker.
    pub(crate) max_result_bytes: usize,
    /// Where the whole output of a cut result is kept.
    pub(crate) kept: Arc<KeptOutputs>,
}

impl Shaper {
    /// The result of `output`, a call of `tool` by the caller of `cx`. `output_schema`: the
    /// version's, if it declares one. Exact `secrets` are scrubbed from a kept output (the
    /// result itself is redacted by the caller); a kept output belongs to the caller.
    ///
    /// # Errors
    /// The result breaks the tool's contract: outputSchema, content items.
    pub(crate) async fn shape(
        &self,
        output: &RunOutput,
        output_schema: Option<&LazySchema>,
        secrets: &[String],
        limits: RunLimits,
        tool: &str,
        cx: &RequestCx<'_>,
    ) -> Result<CallToolResult, ResultError> {
        let resource_links = cx.resource_links();
        let failed = !output.exit.is_success();
        // A result given through the helper module wins over stdout.
        if !failed && let Some(given) = &output.result {
            return self.given_result(given, output_schema, secrets);
        }
        if !failed && let Some(schema) = output_schema {
            let stdout = String::from_utf8_lossy(&output.stdout);
            return match serde_json::from_str::<Value>(stdout.trim()) {
                Ok(value @ Value::Object(_)) => match schema.check(&value) {
                    Ok(()) => Ok(structured_result(value, secrets, self.max_result_bytes)),
                    Err(problems) => Err(ResultError::OutputSchema(problems)),
                },
                _ => Err(ResultError::NotAnObject {
                    got: cut(&scrub(stdout.trim(), secrets), 500),
                }),
            };
        }
        let text = shown_text(output, secrets, limits, self.max_result_bytes);
        let mut blocks = Vec::new();
        if let Some(shown) = text.cut {
            // Keep the whole captured output for a while and link to it.
            let kept = self.kept.keep(cx, tool, &text.whole).await;
            let Some(uri) = kept else {
                blocks.push(ContentBlock::text(format!(
                    "{shown}\n[cut: the whole output could not be kept]"
                )));
                let mut result = CallToolResult::success(blocks);
                result.is_error = Some(text.is_error);
                return Ok(result);
            };
            blocks.push(ContentBlock::text(format!(
                "{shown}\n[the whole output: {uri}]"
            )));
            if resource_links {
                blocks.push(ContentBlock::resource_link(
                    rmcp::model::Resource::new(uri, "output")
                        .with_description("The whole captured output of this tool call")
                        .with_mime_type("text/plain")
                        .with_size(text.whole.len() as u64),
                ));
            }
        } else {
            blocks.push(ContentBlock::text(text.whole));
        }
        let mut result = CallToolResult::success(blocks);
        result.is_error = Some(text.is_error);
        Ok(result)
    }

    /// The result a script gave through the helper module (`omniforge.result`).
    fn given_result(
        &self,
        given: &ScriptResult,
        output_schema: Option<&LazySchema>,
        secrets: &[String],
    ) -> Result<CallToolResult, ResultError> {
        let content = given.content.clone();
        let structured = given.structured.clone();
        // An error result reports a failure, not the promised structure: its structured
        // content is not checked against the outputSchema.
        if !given.is_error
            && let (Some(value), Some(schema)) = (&structured, output_schema)
        {
            schema.check(value).map_err(ResultError::OutputSchema)?;
        }
        let mut blocks = Vec::new();
        match content {
            Some(Value::String(text)) => {
                // Redacted before the cut: a secret across it must not show its start.
                blocks.push(ContentBlock::text(cut(
                    &scrub(&text, secrets),
                    self.max_result_bytes,
                )))
            }
            Some(Value::Array(items)) => {
                for (index, item) in items.into_iter().enumerate() {
                    blocks.push(
                        content_block(item)
                            .map_err(|reason| ResultError::ContentItem { index, reason })?,
                    );
                }
            }
            Some(item @ Value::Object(_)) => {
                blocks.push(content_block(item).map_err(|reason| ResultError::Content { reason })?)
            }
            Some(other) => {
                return Err(ResultError::ContentShape {
                    kind: json_kind(&other),
                });
            }
            None => {}
        }
        if blocks.is_empty()
            && let Some(value) = &structured
        {
            blocks.push(ContentBlock::text(value.to_string()));
        }
        let mut result = CallToolResult::success(blocks);
        result.structured_content = structured.filter(Value::is_object);
        if given.is_error {
            result.is_error = Some(true);
        }
        Ok(result)
    }
}

/// One content item of a script's result, checked: a known `type` with its required fields,
/// and base64 where MCP says base64. The error says what is wrong.
fn content_block(item: Value) -> Result<ContentBlock, InvalidContent> {
    let kind = match item.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(other) => {
            return Err(InvalidContent(format!(
                "\"type\" must be a string, got {}",
                json_kind(other)
            )));
        }
        None => {
            return Err(InvalidContent(
                "it has no \"type\" (one of text, image, audio, resource, resource_link)".into(),
            ));
        }
    };
    if !matches!(
        kind.as_str(),
        "text" | "image" | "audio" | "resource" | "resource_link"
    ) {
        return Err(InvalidContent(format!(
            "unknown type {kind:?} (one of text, image, audio, resource, resource_link)"
        )));
    }
    let base64_field = |pointer: &str, field: &str| -> Result<(), InvalidContent> {
        match item.pointer(pointer) {
            Some(Value::String(data)) => base64::engine::general_purpose::STANDARD
                .decode(data)
                .map(|_| ())
                .map_err(|e| InvalidContent(format!("{kind}: \"{field}\" is not base64 ({e})"))),
            _ => Ok(()),
        }
    };
    match kind.as_str() {
        "image" | "audio" => base64_field("/data", "data")?,
        "resource" => {
            let contents = item.get("resource");
            if contents.is_some_and(|c| c.get("text").is_none() && c.get("blob").is_none()) {
                return Err(InvalidContent(
                    "resource: \"resource\" needs \"text\" or \"blob\"".into(),
                ));
            }
            base64_field("/resource/blob", "resource.blob")?;
        }
        _ => {}
    }
    serde_json::from_value::<ContentBlock>(item).map_err(|e| InvalidContent(format!("{kind}: {e}")))
}

/// "an object", "a number", ...: for error messages.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn structured_result(value: Value, secrets: &[String], max_bytes: usize) -> CallToolResult {
    // Redacted before the cut (the structured content itself is redacted by the caller).
    let text = cut(&scrub(&value.to_string(), secrets), max_bytes);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

/// The text result of a run: the prototype's text with exact secrets redacted, before any cut.
struct ShownText {
    /// The whole text (what is kept when it is cut).
    whole: String,
    /// The text cut to the size cap, when it is over it.
    cut: Option<String>,
    is_error: bool,
}

/// The text result of `output` for a client that gets at most `max` bytes. Secrets are
/// redacted before the cut, and a captured stream cut at the capture cap (whose rest is gone)
/// has a tail that starts a secret redacted as well: a secret across either cut never shows
/// its first characters.
fn shown_text(output: &RunOutput, secrets: &[String], limits: RunLimits, max: usize) -> ShownText {
    let redacted;
    let output = if output.stdout_truncated_bytes > 0 || output.stderr_truncated_bytes > 0 {
        let mut copy = output.clone();
        if copy.stdout_truncated_bytes > 0 {
            redact_cut_tail(&mut copy.stdout, secrets);
        }
        if copy.stderr_truncated_bytes > 0 {
            redact_cut_tail(&mut copy.stderr, secrets);
        }
        redacted = copy;
        &redacted
    } else {
        output
    };
    let (text, is_error) = prototype_text(output, None);
    let mut whole = scrub(&text, secrets);
    add_hints(&mut whole, output, limits);
    let cut = (whole.len() > max).then(|| cut(&whole, max));
    ShownText {
        whole,
        cut,
        is_error,
    }
}

/// What a failed run's text says besides the prototype's: the time limit a `[timeout]` hit,
/// and, for a run without network access whose stderr says `Operation not permitted` (what a
/// refused socket raises), that it has none and how to give it.
fn add_hints(text: &mut String, output: &RunOutput, limits: RunLimits) {
    if output.exit == Exit::Timeout
        && let Some(at) = text.rfind("\n[timeout]")
    {
        let end = at + "\n[timeout]".len();
        text.insert_str(
            end,
            &format!(
                " the call ran past its time limit of {} (timeout_s)",
                seconds(limits.timeout)
            ),
        );
    }
    let failed = !output.exit.is_success();
    if failed && !limits.network {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("Operation not permitted") {
            text.push_str(
                "\n[no network: this tool was written without `network: true`, so its \
                 connections are refused; update it with network: true if it needs the network]",
            );
        }
    }
}

/// `1 s`, `2.5 s`.
fn seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}

/// Cuts `text` to at most `max` bytes (at a character boundary) with a marker saying how
/// many bytes were left out.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[{} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_items_are_checked() {
        let png = "iVBORw0KGgo=";
        assert!(content_block(json!({"type": "text", "text": "hi"})).is_ok());
        assert!(
            content_block(json!({"type": "image", "data": png, "mimeType": "image/png"})).is_ok()
        );
        assert!(
            content_block(
                json!({"type": "resource", "resource": {"uri": "test://x", "text": "t"}})
            )
            .is_ok()
        );
        let err = |v: Value| content_block(v).unwrap_err().to_string();
        assert!(err(json!({"text": "hi"})).contains("no \"type\""));
        assert!(err(json!({"type": "video"})).contains("unknown type \"video\""));
        assert!(
            err(json!({"type": "image", "data": "not base64!", "mimeType": "image/png"}))
                .contains("not base64")
        );
        assert!(err(json!({"type": "image", "data": png})).contains("mimeType"));
        assert!(
            err(json!({"type": "resource", "resource": {"uri": "test://x"}}))
                .contains("needs \"text\" or \"blob\"")
        );
    }

    const LIMITS: RunLimits = RunLimits {
        timeout: std::time::Duration::from_secs(30),
        network: false,
    };

    #[test]
    fn a_timeout_says_its_limit_and_a_refused_socket_says_there_is_no_network() {
        let mut out = run_output("going to sleep\n", 0);
        out.exit = Exit::Timeout;
        let limits = RunLimits {
            timeout: std::time::Duration::from_millis(1500),
            network: false,
        };
        let text = shown_text(&out, &[], limits, 1000).whole;
        assert_eq!(
            text,
            "going to sleep\n[timeout] the call ran past its time limit of 1.5 s (timeout_s)"
        );
        let mut out = run_output("", 0);
        out.exit = Exit::Code(1);
        out.stderr =
            b"Traceback ...\nPermissionError: [Errno 1] Operation not permitted\n".to_vec();
        let text = shown_text(&out, &[], LIMITS, 1000).whole;
        assert!(text.ends_with("[exit 1]\n[no network: this tool was written without `network: true`, so its connections are refused; update it with network: true if it needs the network]"), "{text}");
        // With network allowed, or a run that succeeded, no hint.
        let allowed = RunLimits {
            network: true,
            ..LIMITS
        };
        assert!(
            !shown_text(&out, &[], allowed, 1000)
                .whole
                .contains("no network")
        );
        out.exit = Exit::Code(0);
        assert!(
            !shown_text(&out, &[], LIMITS, 1000)
                .whole
                .contains("no network")
        );
    }

    fn run_output(stdout: &str, stdout_truncated_bytes: u64) -> RunOutput {
        RunOutput {
            stdout: stdout.as_bytes().to_vec(),
            stderr: Vec::new(),
            stdout_truncated_bytes,
            stderr_truncated_bytes: 0,
            exit: omniforge_script::Exit::Code(0),
            duration: std::time::Duration::ZERO,
            result: None,
            limit: None,
        }
    }

    #[test]
    fn a_secret_across_the_result_cut_shows_none_of_it() {
        let secret = "s3cr3t-value-0123456789".to_owned();
        let secrets = [secret.clone()];
        let max = 64 * 1024;
        for before in [max - 1, max - 5, max - secret.len() + 1] {
            let stdout = format!("{}{secret} and more{}", "x".repeat(before), "y".repeat(99));
            let text = shown_text(&run_output(&stdout, 0), &secrets, LIMITS, max);
            let shown = text.cut.expect("over the cap");
            assert!(!shown.contains("s3c"), "{}", &shown[shown.len() - 60..]);
            assert!(!text.whole.contains(&secret));
            assert!(text.whole.contains("[redacted] and more"));
        }
        // A captured stream cut at the capture cap: the rest is gone, the start is redacted.
        let stdout = format!("{}{}", "x".repeat(100), &secret[..7]);
        let text = shown_text(&run_output(&stdout, 1000), &secrets, LIMITS, max);
        assert!(text.cut.is_none());
        assert!(!text.whole.contains("s3c"), "{}", text.whole);
        assert!(
            text.whole
                .contains("x[redacted]\n[stdout truncated: 1000 bytes]")
        );
    }

    #[test]
    fn cut_marks_what_is_left_out() {
        assert_eq!(cut("hello", 10), "hello");
        let out = cut("héllo world", 2);
        assert!(
            out.starts_with('h') && out.contains("more bytes not shown"),
            "{out}"
        );
    }
}

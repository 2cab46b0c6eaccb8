//! Secret redaction: every exact secret value (of at least 4 bytes) in what a call sends the
//! client (results, progress messages, log data, requests to the client) becomes `[redacted]`.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::error::ResultError;

/// `text` with every exact secret value of at least 4 bytes replaced by `[redacted]`.
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| s.len() >= 4)
        .fold(text.to_owned(), |t, s| t.replace(s.as_str(), "[redacted]"))
}

/// `value` with every exact secret value (of at least 4 bytes) in its strings replaced by
/// `[redacted]` (the whole value becomes `"[redacted]"` if the replacement breaks its JSON).
pub(crate) fn scrub_value(value: Value, secrets: &[String]) -> Value {
    if !secrets.iter().any(|s| s.len() >= 4) {
        return value;
    }
    let json = value.to_string();
    let cleaned = scrub(&json, secrets);
    if cleaned == json {
        return value;
    }
    serde_json::from_str(&cleaned).unwrap_or_else(|_| Value::String("[redacted]".into()))
}

/// `error` with every exact secret value (of at least 4 bytes) in its text replaced by
/// `[redacted]`: a broken contract's text may quote what the script printed.
pub(crate) fn redact_error(error: ResultError, secrets: &[String]) -> ResultError {
    if !secrets.iter().any(|s| s.len() >= 4) {
        return error;
    }
    let text = error.to_string();
    let cleaned = scrub(&text, secrets);
    if cleaned == text {
        error
    } else {
        ResultError::Redacted(cleaned)
    }
}

/// Replaces every exact secret value (of at least 4 bytes) in the result with `[redacted]`.
pub(crate) fn redact(result: &mut CallToolResult, secrets: &[String]) {
    if !secrets.iter().any(|s| s.len() >= 4) {
        return;
    }
    let scrub = |text: &str| scrub(text, secrets);
    for block in &mut result.content {
        if let Some(text) = block.as_text() {
            let cleaned = scrub(&text.text);
            if cleaned != text.text {
                *block = ContentBlock::text(cleaned);
            }
        } else if let Ok(json) = serde_json::to_string(&*block) {
            // Rich content (an embedded resource's text, a link's uri or name, ...).
            let cleaned = scrub(&json);
            if cleaned != json {
                *block = serde_json::from_str(&cleaned)
                    .unwrap_or_else(|_| ContentBlock::text("[redacted]"));
            }
        }
    }
    if let Some(structured) = &result.structured_content {
        let cleaned = scrub(&structured.to_string());
        result.structured_content = serde_json::from_str(&cleaned)
            .ok()
            .or(Some(Value::Null))
            .filter(|v| !v.is_null());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_from_text_rich_and_structured_content() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("token=s3cr3t-value ok")]);
        result.structured_content = Some(json!({"t": "s3cr3t-value"}));
        redact(&mut result, &["s3cr3t-value".to_owned(), "ab".to_owned()]);
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("token=[redacted] ok")
        );
        assert_eq!(result.structured_content, Some(json!({"t": "[redacted]"})));

        let resource: ContentBlock =
            serde_json::from_value(json!({"type": "resource", "resource": {
            "uri": "test://r", "mimeType": "text/plain", "text": "key s3cr3t-value"}}))
            .unwrap();
        let mut result = CallToolResult::success(vec![resource]);
        redact(&mut result, &["s3cr3t-value".to_owned()]);
        assert_eq!(
            serde_json::to_value(&result.content[0]).unwrap(),
            json!({"type": "resource", "resource": {
                "uri": "test://r", "mimeType": "text/plain", "text": "key [redacted]"}})
        );
    }
}

//! Secret redaction: every exact secret value (of at least 4 bytes) in what a call sends the
//! client (results, progress messages, log data, requests to the client) becomes `[redacted]`.
//! Where output was cut and the rest is gone (the capture cap), a tail that begins a secret
//! becomes `[redacted]` too ([`redact_cut_tail`]); text that is whole is redacted before it is
//! cut for the client.

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

/// Replaces the longest tail of `bytes` that is the start of a secret (of at least 4 bytes)
/// with `[redacted]`: for output cut where the rest is gone, so that a secret that straddles
/// the cut does not show its first characters. Answers whether it replaced anything.
pub(crate) fn redact_cut_tail(bytes: &mut Vec<u8>, secrets: &[String]) -> bool {
    let tail = secrets
        .iter()
        .filter(|s| s.len() >= 4)
        .map(|s| secret_prefix_at_end(bytes, s.as_bytes()))
        .max()
        .unwrap_or(0);
    if tail == 0 {
        return false;
    }
    bytes.truncate(bytes.len() - tail);
    bytes.extend_from_slice(b"[redacted]");
    true
}

/// The length of the longest suffix of `text` that is a prefix of `secret` (KMP: linear in
/// the lengths, as a secret may be 64 KiB long).
fn secret_prefix_at_end(text: &[u8], secret: &[u8]) -> usize {
    // failure[i]: the longest proper prefix of secret[..=i] that is also its suffix.
    let mut failure = vec![0usize; secret.len()];
    let mut k = 0;
    for i in 1..secret.len() {
        while k > 0 && secret[i] != secret[k] {
            k = failure[k - 1];
        }
        if secret[i] == secret[k] {
            k += 1;
        }
        failure[i] = k;
    }
    // Only the last `secret.len()` bytes can hold a prefix that runs to the end.
    let start = text.len().saturating_sub(secret.len());
    let mut state = 0;
    for &b in &text[start..] {
        while state > 0 && (state == secret.len() || b != secret[state]) {
            state = failure[state - 1];
        }
        if b == secret[state] {
            state += 1;
        }
    }
    state
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
    fn a_secret_cut_at_the_end_is_redacted_from_its_first_byte() {
        let secrets = ["s3cr3t-value".to_owned(), "ab".to_owned()];
        for keep in 1..12 {
            let mut out = format!("token={}", &secrets[0][..keep]).into_bytes();
            assert!(redact_cut_tail(&mut out, &secrets), "{keep}");
            assert_eq!(out, b"token=[redacted]", "{keep}");
        }
        // Self-overlapping secrets: the longest tail that starts one.
        let secrets = ["abab-abac".to_owned()];
        let mut out = b"x abab-aba".to_vec();
        assert!(redact_cut_tail(&mut out, &secrets));
        assert_eq!(out, b"x [redacted]");
        let mut out = b"x abab-abX".to_vec();
        assert!(!redact_cut_tail(&mut out, &secrets));
        let mut out = b"abab-abab".to_vec();
        assert!(redact_cut_tail(&mut out, &secrets));
        assert_eq!(out, b"abab-[redacted]");
        // Short "secrets" are not redacted anywhere; text that ends elsewhere stays.
        let mut out = b"token=a".to_vec();
        assert!(!redact_cut_tail(&mut out, &["ab".to_owned()]));
        let mut out = b"no secret here".to_vec();
        assert!(!redact_cut_tail(&mut out, &["s3cr3t-value".to_owned()]));
    }

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

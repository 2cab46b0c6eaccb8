//! Lines that cannot be parsed whole still get an answer (issue 11, finding 9).
//!
//! serde_json stops at 128 levels of nesting, and rmcp parses each message again into its
//! typed form, where the same text may nest deeper (untagged and flattened enums buffer it):
//! a message that our filter parsed could be dropped by rmcp without a word. So before a
//! request is forwarded, [`rmcp_drops`] parses it as rmcp will; what rmcp would drop is
//! answered with -32700 here. And when a line cannot be parsed at all, [`recover_id`] finds
//! the top-level `"id"` by scanning, so the -32700 echoes it.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::Value;
use serde_json::error::Category;

/// Why rmcp would silently drop `message` (it cannot parse it as a client message, and the
/// fault is syntax, such as nesting past serde_json's limit), or `None` when rmcp takes it
/// or answers the fault itself.
pub(crate) fn rmcp_drops(message: &Value) -> Option<String> {
    // Only deep messages can fail where the tree parsed; most are a few levels deep.
    if !deeper_than(message, 32) {
        return None;
    }
    let text = serde_json::to_vec(message).ok()?;
    match serde_json::from_slice::<ClientJsonRpcMessage>(&text) {
        Ok(_) => None,
        Err(e) if matches!(e.classify(), Category::Syntax | Category::Eof) => Some(e.to_string()),
        Err(_) => None,
    }
}

/// Whether `value` nests more than `levels` arrays and objects deep.
fn deeper_than(value: &Value, levels: usize) -> bool {
    let children: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(members) => Box::new(members.values()),
        _ => return false,
    };
    levels == 0 || children.into_iter().any(|c| deeper_than(c, levels - 1))
}

/// The value of the top-level `"id"` member of a JSON object text, when it is a number,
/// a string or `null`, found by scanning (the text need not parse as a whole).
pub(crate) fn recover_id(text: &[u8]) -> Option<Value> {
    let top_is_object = text.get(skip_ws(text, 0)) == Some(&b'{');
    let mut depth = 0usize;
    let mut i = 0usize;
    // Whether the next string at depth 1 is a key (after `{` or `,`).
    let mut expect_key = false;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let end = string_end(text, i)?;
                if depth == 1 && expect_key {
                    let key = &text[i..=end];
                    let after = skip_ws(text, end + 1);
                    if key == b"\"id\"" && text.get(after) == Some(&b':') {
                        return scalar_at(text, skip_ws(text, after + 1));
                    }
                }
                expect_key = false;
                i = end + 1;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = text[i] == b'{' && depth == 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                expect_key = false;
            }
            b',' => expect_key = depth == 1 && top_is_object,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote that closes the string opening at `start`.
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn skip_ws(text: &[u8], mut i: usize) -> usize {
    while text.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// A number, string or `null` starting at `i`.
fn scalar_at(text: &[u8], i: usize) -> Option<Value> {
    let first = *text.get(i)?;
    let end = if first == b'"' {
        string_end(text, i)? + 1
    } else {
        let mut j = i;
        while text
            .get(j)
            .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
        {
            j += 1;
        }
        j
    };
    match serde_json::from_slice::<Value>(&text[i..end]).ok()? {
        v @ (Value::Number(_) | Value::String(_) | Value::Null) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"x","arguments":{{"a":{}1{}}}}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    }

    #[test]
    fn the_top_level_id_is_found_in_text_that_does_not_parse() {
        assert_eq!(recover_id(nested(500).as_bytes()), Some(json!(7)));
        assert_eq!(
            recover_id(br#"{"params":{"id":1},"id":"a\"b", "x": "#),
            Some(json!("a\"b"))
        );
        assert_eq!(recover_id(br#"{"params":{"id":1}}"#), None);
        assert_eq!(recover_id(br#"["id", 1]"#), None);
        assert_eq!(recover_id(br#"{"x":"id","id":null}"#), Some(Value::Null));
        assert_eq!(recover_id(br#"{"id":{"a":1}}"#), None);
    }

    #[test]
    fn deep_messages_that_rmcp_would_drop_are_caught() {
        for depth in [120, 126, 127, 200] {
            if let Ok(value) = serde_json::from_str::<Value>(&nested(depth)) {
                let dropped = rmcp_drops(&value);
                let reparsed = serde_json::from_slice::<ClientJsonRpcMessage>(
                    &serde_json::to_vec(&value).unwrap(),
                );
                assert_eq!(dropped.is_some(), reparsed.is_err(), "depth {depth}");
            }
        }
        let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
        assert_eq!(rmcp_drops(&ping), None);
    }
}

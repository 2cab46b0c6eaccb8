//! `prompts/get`: the stored prompt's messages with each declared `{argument}` filled in
//! (in every string of a message, not in base64 `data`/`blob`).

use std::collections::BTreeMap;

use rmcp::model::{GetPromptRequestParams, GetPromptResult, PromptMessage};
use serde_json::Value;

use crate::content::snapshot::Content;
use crate::content::uri_template::substitute;
use crate::error::ContentError;

impl Content {
    /// `prompts/get`.
    ///
    /// # Errors
    /// -32602 for an unknown prompt, a missing required argument or an undeclared one.
    pub(crate) fn get_prompt(
        &self,
        request: &GetPromptRequestParams,
    ) -> Result<GetPromptResult, ContentError> {
        let snapshot = self.snapshot();
        let Some(prompt) = snapshot
            .prompts
            .iter()
            .find(|p| p.spec.name == request.name)
        else {
            return Err(ContentError::InvalidParams(format!(
                "unknown prompt {:?} (prompts/list shows the available ones)",
                request.name
            )));
        };
        let spec = &prompt.spec;
        let given = request.arguments.clone().unwrap_or_default();
        let mut values = BTreeMap::new();
        let mut problems = Vec::new();
        for (name, value) in &given {
            if !spec.arguments.iter().any(|a| &a.name == name) {
                problems.push(format!("unknown argument {name:?}"));
                continue;
            }
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => other.to_string(),
            };
            values.insert(name.clone(), text);
        }
        let missing: Vec<&str> = spec
            .arguments
            .iter()
            .filter(|a| a.required && !values.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            problems.push(format!(
                "missing required argument{} {}",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ));
        }
        if !problems.is_empty() {
            let declared: Vec<String> = spec
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        format!("{} (required)", a.name)
                    } else {
                        a.name.clone()
                    }
                })
                .collect();
            return Err(ContentError::InvalidParams(format!(
                "prompt {}: {}; its arguments: {}",
                spec.name,
                problems.join("; "),
                if declared.is_empty() {
                    "none".to_owned()
                } else {
                    declared.join(", ")
                }
            )));
        }
        // Optional arguments left out read as empty text.
        for a in &spec.arguments {
            values.entry(a.name.clone()).or_default();
        }
        let mut messages = Vec::new();
        for message in &spec.messages {
            let mut message = message.clone();
            substitute_value(&mut message, &values);
            let parsed: PromptMessage =
                serde_json::from_value(message).map_err(ContentError::Unreadable)?;
            messages.push(parsed);
        }
        let mut result = GetPromptResult::new(messages);
        result.description = spec.description.clone();
        Ok(result)
    }
}

/// Substitutes in every string of a prompt message content, except base64 payloads and type
/// tags.
fn substitute_value(value: &mut Value, values: &BTreeMap<String, String>) {
    match value {
        Value::String(s) => *s = substitute(s, values),
        Value::Array(items) => items.iter_mut().for_each(|v| substitute_value(v, values)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if !matches!(key.as_str(), "data" | "blob" | "type" | "mimeType") {
                    substitute_value(v, values);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompt_placeholders_skip_payloads_and_unknown_braces() {
        let values = BTreeMap::from([("arg1".to_owned(), "hello".to_owned())]);
        let mut content = json!({"role": "user", "content": {"type": "resource", "resource": {
            "uri": "test://{arg1}", "text": "{arg1} {other} {\"json\": 1}", "mimeType": "text/{arg1}"}}});
        substitute_value(&mut content, &values);
        assert_eq!(content["content"]["resource"]["uri"], "test://hello");
        assert_eq!(
            content["content"]["resource"]["text"],
            "hello {other} {\"json\": 1}"
        );
        assert_eq!(content["content"]["resource"]["mimeType"], "text/{arg1}");
    }
}

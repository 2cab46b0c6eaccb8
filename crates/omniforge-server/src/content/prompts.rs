//! `prompts/get`: the stored prompt's messages with each declared `{argument}` filled in
//! (in every string of a message, not in base64 `data`/`blob`), or what a script prompt prints
//! (the arguments as JSON stdin), run through the call loop so the script's questions reach
//! the client as a tool call's do.

use std::collections::BTreeMap;

use omniforge_store::ScriptSpec;
use rmcp::model::{GetPromptRequestParams, GetPromptResult, PromptMessage};
use serde_json::{Value, json};

use crate::content::args::normalize_message;
use crate::content::run::NoContent;
use crate::content::snapshot::Content;
use crate::content::uri_template::substitute;
use crate::context::request::RequestCx;
use crate::error::ContentError;
use crate::runs::content_run::ContentScript;

/// What `prompts/get` answers.
enum Prompt {
    /// The messages, ready.
    Ready(GetPromptResult),
    /// A script prompt's run, still to be made.
    Script(PromptRun),
}

/// The run of a script prompt: the script gets the given arguments as a JSON object on stdin
/// and prints the messages.
struct PromptRun {
    /// The prompt's name.
    name: String,
    /// The prompt definition's digest (what a `requestState` is bound to).
    digest: String,
    /// The script.
    script: ScriptSpec,
    /// The arguments given, as a JSON object of strings.
    input: Value,
    /// The prompt's `description`.
    description: Option<String>,
}

impl PromptRun {
    /// The result of the script's printed `text`: a JSON array of PromptMessages (`content`
    /// may be a plain string), a JSON object `{messages, description?}`, or any other text as
    /// one user message.
    ///
    /// # Errors
    /// -32603: printed JSON that is not messages.
    fn result(&self, text: &str) -> Result<GetPromptResult, ContentError> {
        let problem = |reason: String| ContentError::PromptOutput {
            prompt: self.name.clone(),
            reason,
        };
        let mut description = self.description.clone();
        let printed = match serde_json::from_str::<Value>(text.trim()) {
            Ok(Value::Array(messages)) => messages,
            Ok(Value::Object(mut map)) => {
                if let Some(Value::String(d)) = map.remove("description") {
                    description = Some(d);
                }
                match map.remove("messages") {
                    Some(Value::Array(messages)) => messages,
                    _ => {
                        return Err(problem(
                            "a JSON object needs \"messages\": [...]".to_owned(),
                        ));
                    }
                }
            }
            _ => vec![json!({"role": "user", "content": text.trim_end_matches('\n')})],
        };
        if printed.is_empty() {
            return Err(problem("no messages".to_owned()));
        }
        let mut messages = Vec::with_capacity(printed.len());
        for (i, message) in printed.into_iter().enumerate() {
            let message = normalize_message(i, message).map_err(|e| problem(e.to_string()))?;
            let parsed: PromptMessage =
                serde_json::from_value(message).map_err(|e| problem(e.to_string()))?;
            messages.push(parsed);
        }
        let mut result = GetPromptResult::new(messages);
        result.description = description;
        Ok(result)
    }
}

impl Content {
    /// `prompts/get` for the request of `cx`: the messages. A script prompt runs here; its
    /// questions are asked as a tool's are.
    ///
    /// # Errors
    /// -32602 for an unknown prompt, a missing required argument or an undeclared one; -32603
    /// when the prompt's script fails or prints what are not messages; [`NoContent::Answer`]
    /// when the request ends another way (input required, a `requestState` that does not open).
    pub(crate) async fn get_prompt(
        &self,
        request: &GetPromptRequestParams,
        cx: &RequestCx<'_>,
    ) -> Result<GetPromptResult, NoContent> {
        let run = match self.prompt(request)? {
            Prompt::Ready(result) => return Ok(result),
            Prompt::Script(run) => run,
        };
        let script = ContentScript {
            kind: "prompt",
            name: &run.name,
            digest: run.digest.clone(),
            script: &run.script,
            input: run.input.clone(),
            bound: json!({"arguments": run.input}),
        };
        let failed = |error| ContentError::PromptFailed {
            prompt: run.name.clone(),
            error,
        };
        let text = self.run_script(script, cx, failed).await?;
        Ok(run.result(&text)?)
    }

    /// The messages of `request`'s prompt, or its script's run to make.
    ///
    /// # Errors
    /// -32602 for an unknown prompt, a missing required argument or an undeclared one.
    fn prompt(&self, request: &GetPromptRequestParams) -> Result<Prompt, ContentError> {
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
        if let Some(script) = &spec.script {
            return Ok(Prompt::Script(PromptRun {
                name: spec.name.clone(),
                digest: omniforge_store::digest::prompt_sha256(spec),
                script: script.clone(),
                input: Value::Object(
                    values
                        .into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect(),
                ),
                description: spec.description.clone(),
            }));
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
        Ok(Prompt::Ready(result))
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

    fn run() -> PromptRun {
        PromptRun {
            name: "p".into(),
            digest: String::new(),
            script: ScriptSpec {
                code: String::new(),
                dependencies: vec![],
                lock: String::new(),
                env_id: String::new(),
                timeout_ms: 1000,
                memory_bytes: 1 << 20,
                network: false,
            },
            input: json!({}),
            description: Some("d".into()),
        }
    }

    #[test]
    fn a_prompt_script_prints_messages_as_json_or_text() {
        let r = run();
        let array = r
            .result(r#"[{"role": "assistant", "content": "hi"}]"#)
            .unwrap();
        assert_eq!(array.messages.len(), 1);
        assert_eq!(
            serde_json::to_value(&array.messages[0]).unwrap(),
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"}})
        );
        let object = r
            .result(r#"{"description": "mine", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}"#)
            .unwrap();
        assert_eq!(object.messages.len(), 2);
        assert_eq!(object.description.as_deref(), Some("mine"));
        let text = r.result("Use this context: x\n").unwrap();
        assert_eq!(
            serde_json::to_value(&text.messages[0]).unwrap(),
            json!({"role": "user", "content": {"type": "text", "text": "Use this context: x"}})
        );
        assert_eq!(text.description.as_deref(), Some("d"));
        for bad in [
            r#"{"text": 1}"#,
            "[]",
            r#"[{"role": "robot", "content": "x"}]"#,
        ] {
            let err = r.result(bad).unwrap_err();
            assert!(
                matches!(err, ContentError::PromptOutput { .. }),
                "{bad}: {err}"
            );
        }
    }

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

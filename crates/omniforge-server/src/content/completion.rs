//! `completion/complete` for a prompt argument or a template variable: the declared values
//! that start with what was typed, then what the completion script prints.

use omniforge_store::ScriptSpec;
use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::content::snapshot::Content;
use crate::error::ContentError;

/// Most values one `completion/complete` answer carries (the spec's limit).
pub(crate) const MAX_COMPLETIONS: usize = 100;

impl Content {
    /// `completion/complete` for a prompt argument or a template variable.
    ///
    /// # Errors
    /// -32602 for an unknown prompt, template or argument; -32603 when the script fails.
    pub(crate) async fn complete(
        &self,
        request: &CompleteRequestParams,
        ct: CancellationToken,
    ) -> Result<CompleteResult, ContentError> {
        let snapshot = self.snapshot();
        let argument = &request.argument;
        let (declared, script): (Vec<String>, Option<&ScriptSpec>) = match &request.r#ref {
            Reference::Prompt(p) => {
                let Some(prompt) = snapshot.prompts.iter().find(|s| s.spec.name == p.name) else {
                    return Err(ContentError::InvalidParams(format!(
                        "unknown prompt {:?}",
                        p.name
                    )));
                };
                let Some(arg) = prompt
                    .spec
                    .arguments
                    .iter()
                    .find(|a| a.name == argument.name)
                else {
                    return Err(ContentError::InvalidParams(format!(
                        "prompt {} has no argument {:?}",
                        p.name, argument.name
                    )));
                };
                (arg.values.clone(), prompt.spec.completion_script.as_ref())
            }
            Reference::Resource(r) => {
                let Some((template, parsed)) = snapshot
                    .templates
                    .iter()
                    .find(|(t, _)| t.spec.uri_template == r.uri)
                else {
                    return Err(ContentError::InvalidParams(format!(
                        "unknown resource template {:?}",
                        r.uri
                    )));
                };
                if !parsed.var_names().any(|v| v == argument.name) {
                    return Err(ContentError::InvalidParams(format!(
                        "resource template {} has no variable {:?}",
                        r.uri, argument.name
                    )));
                }
                (
                    template
                        .spec
                        .completions
                        .get(&argument.name)
                        .cloned()
                        .unwrap_or_default(),
                    template.spec.completion_script.as_ref(),
                )
            }
            _ => {
                return Err(ContentError::InvalidParams(
                    "unsupported reference type".into(),
                ));
            }
        };
        let extra = match script {
            Some(script) => {
                let input = json!({
                    "ref": request.r#ref,
                    "argument": {"name": argument.name, "value": argument.value},
                    "context": {"arguments": request.context.as_ref().and_then(|c| c.arguments.clone()).unwrap_or_default()},
                });
                let out = self
                    .host
                    .run_script(script, input, ct)
                    .await
                    .map_err(ContentError::CompletionFailed)?;
                parse_completion_output(&out)?
            }
            None => Vec::new(),
        };
        Ok(CompleteResult::new(complete_from(
            &declared,
            extra,
            &argument.value,
        )))
    }
}

/// Declared values starting with `prefix` (case-insensitive), then the script's, without
/// duplicates; at most [`MAX_COMPLETIONS`], with `total` and `hasMore`.
pub(crate) fn complete_from(
    declared: &[String],
    extra: Vec<String>,
    prefix: &str,
) -> CompletionInfo {
    let lower = prefix.to_lowercase();
    let mut all: Vec<String> = Vec::new();
    for value in declared
        .iter()
        .filter(|v| v.to_lowercase().starts_with(&lower))
        .cloned()
        .chain(extra)
    {
        if !all.contains(&value) {
            all.push(value);
        }
    }
    let total = all.len();
    all.truncate(MAX_COMPLETIONS);
    let mut info = CompletionInfo::default();
    info.values = all;
    info.total = Some(u32::try_from(total).unwrap_or(u32::MAX));
    info.has_more = Some(total > MAX_COMPLETIONS);
    info
}

/// A completion script prints a JSON array of strings, or `{"values": [...]}`, or one value
/// per line.
fn parse_completion_output(out: &str) -> Result<Vec<String>, ContentError> {
    let trimmed = out.trim();
    let strings = |items: &[Value]| -> Result<Vec<String>, ContentError> {
        items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_owned).ok_or_else(|| {
                    ContentError::CompletionOutput(format!("values must be strings, got {v}"))
                })
            })
            .collect()
    };
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Array(items)) => strings(&items),
        Ok(Value::Object(map)) => match map.get("values") {
            Some(Value::Array(items)) => strings(items),
            _ => Err(ContentError::CompletionOutput(
                "a JSON object must have \"values\": [...]".into(),
            )),
        },
        _ => Ok(trimmed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_filters_by_prefix_and_caps() {
        let declared: Vec<String> = ["paris", "Park", "lyon"].map(String::from).to_vec();
        let info = complete_from(&declared, vec!["party".into(), "paris".into()], "pa");
        assert_eq!(info.values, ["paris", "Park", "party"]);
        assert_eq!((info.total, info.has_more), (Some(3), Some(false)));
        let many: Vec<String> = (0..150).map(|i| format!("v{i}")).collect();
        let info = complete_from(&many, Vec::new(), "");
        assert_eq!(info.values.len(), MAX_COMPLETIONS);
        assert_eq!((info.total, info.has_more), (Some(150), Some(true)));
    }

    #[test]
    fn completion_script_output_shapes() {
        assert_eq!(
            parse_completion_output("[\"a\", \"b\"]").unwrap(),
            ["a", "b"]
        );
        assert_eq!(
            parse_completion_output("{\"values\": [\"a\"]}").unwrap(),
            ["a"]
        );
        assert_eq!(parse_completion_output("a\n b \n\n").unwrap(), ["a", "b"]);
        assert!(parse_completion_output("[1]").is_err());
    }
}

//! Self-testing tools (issue 17): a version's `examples`, each `{"arguments": {...},
//! "expect": {...}}`, checked when the version is written and run in the sandbox before it
//! goes live (create, update, pack import), on demand (`omniforge_check_tool`,
//! `omniforge tool check`) and before a rollback.
//!
//! An example run is an ordinary call of the version's code, shaped as a client would get it,
//! except that it gets **no secrets** (whatever the version declares and whatever grants
//! exist): a failure report quotes the actual output, which then cannot hold a secret value.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use omniforge_script::RunSpec;
use omniforge_store::{ExampleResult, ExampleTrigger, NewVersion};
use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::context::request::{LogFilter, RequestCx};
use crate::error::AuthoringError;
use crate::schema::LazySchema;
use crate::tools::stored::call::StoredTools;
use crate::tools::stored::shape::cut;

/// The most examples one version may carry: each runs in the sandbox, one after another, at
/// every write of the version.
pub(crate) const MAX_EXAMPLES: usize = 20;

/// The most bytes of an actual result quoted in a report (the store keeps as much).
const REPORT_BYTES: usize = omniforge_store::MAX_EXAMPLE_TEXT_BYTES;

// One example call (plain comments: doc comments would become schema descriptions; the
// inputSchema describes the whole `examples` field).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Example {
    // The call's arguments; `{}` when left out.
    #[serde(default)]
    arguments: JsonObject,
    expect: Expect,
}

// What the result must be: every given check must hold.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Expect {
    // The exact result text (the text blocks, joined by a newline).
    text: Option<String>,
    // A string the result text contains.
    contains: Option<String>,
    // The exact `structuredContent` (an object; compared as any value).
    #[schemars(with = "Option<JsonObject>")]
    structured: Option<Value>,
    // A JSON Schema the `structuredContent` must match.
    #[serde(rename = "structuredSchema")]
    structured_schema: Option<JsonObject>,
    // Whether the result is an error (false unless given).
    #[serde(rename = "isError")]
    is_error: Option<bool>,
}

/// Checks the `examples` of a version before anything is built: at most [`MAX_EXAMPLES`],
/// each of the documented shape, with at least one expectation, `structured` and
/// `structuredSchema` not both, a `structuredSchema` that compiles, and arguments that match
/// `input_schema` (an example a client could not send proves nothing).
///
/// # Errors
/// A text naming the example (`examples[2].expect: ...`).
pub(crate) fn check(
    examples: &[JsonObject],
    input_schema: &JsonObject,
) -> Result<(), AuthoringError> {
    if examples.len() > MAX_EXAMPLES {
        return Err(AuthoringError::invalid(
            "examples",
            format!("at most {MAX_EXAMPLES} examples, got {}", examples.len()),
        ));
    }
    let inputs = LazySchema::new("the tool's inputSchema", Arc::new(input_schema.clone()));
    for (index, raw) in examples.iter().enumerate() {
        let example = parse(raw).map_err(|e| {
            AuthoringError::invalid(
                format!("examples[{index}]"),
                format!(
                    "{e} (an example is {{\"arguments\": {{...}}, \"expect\": {{\"text\" | \"contains\" | \"structured\" | \"structuredSchema\" | \"isError\": ...}}}})"
                ),
            )
        })?;
        let expect = &example.expect;
        if expect.text.is_none()
            && expect.contains.is_none()
            && expect.structured.is_none()
            && expect.structured_schema.is_none()
            && expect.is_error.is_none()
        {
            return Err(AuthoringError::invalid(
                format!("examples[{index}].expect"),
                "give at least one of text, contains, structured, structuredSchema, isError",
            ));
        }
        if expect.structured.is_some() && expect.structured_schema.is_some() {
            return Err(AuthoringError::invalid(
                format!("examples[{index}].expect"),
                "give structured or structuredSchema, not both",
            ));
        }
        if let Some(schema) = &expect.structured_schema {
            jsonschema::draft202012::options()
                .build(&Value::Object(schema.clone()))
                .map_err(|e| {
                    AuthoringError::invalid(
                        format!("examples[{index}].expect.structuredSchema"),
                        format!("not a valid JSON Schema 2020-12: {e}"),
                    )
                })?;
        }
        inputs
            .check(&Value::Object(example.arguments.clone()))
            .map_err(|e| {
                AuthoringError::invalid(
                    format!("examples[{index}].arguments"),
                    format!("do not match the inputSchema:\n{e}"),
                )
            })?;
    }
    Ok(())
}

fn parse(raw: &JsonObject) -> Result<Example, serde_json::Error> {
    serde_json::from_value(Value::Object(raw.clone()))
}

/// How one example went.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Its index in the version's examples.
    index: u32,
    /// Whether every expectation held.
    passed: bool,
    /// What the client would have got: `isError`, the text, the structured content.
    actual: String,
    /// What did not hold, one clause per expectation.
    failure: Option<String>,
    /// The example's arguments and expectation, as written (for the report).
    example: JsonObject,
}

/// The outcomes of one run of a version's examples, in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Report {
    outcomes: Vec<Outcome>,
}

impl Report {
    /// Whether the version had examples at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
    }

    /// How many examples failed.
    pub(crate) fn failed(&self) -> usize {
        self.outcomes.iter().filter(|o| !o.passed).count()
    }

    /// `2 of 3 examples passed`.
    pub(crate) fn summary(&self) -> String {
        format!(
            "{} of {} example{} passed",
            self.outcomes.len() - self.failed(),
            self.outcomes.len(),
            if self.outcomes.len() == 1 { "" } else { "s" }
        )
    }

    /// Each failing example with its arguments, expected and actual result, and what did not
    /// hold; empty when all passed.
    pub(crate) fn failures(&self) -> String {
        let mut text = String::new();
        for o in self.outcomes.iter().filter(|o| !o.passed) {
            let arguments = o.example.get("arguments").cloned().unwrap_or(Value::Null);
            let expect = o.example.get("expect").cloned().unwrap_or(Value::Null);
            let _ = write!(
                text,
                "examples[{}] failed: {}\n  arguments: {}\n  expected: {}\n  actual: {}\n",
                o.index,
                o.failure.as_deref().unwrap_or("did not match"),
                cut(&arguments.to_string(), 500),
                cut(&expect.to_string(), 1000),
                o.actual,
            );
        }
        text
    }

    /// One line per example (`examples[0]: passed`, `examples[1]: FAILED: ...`), then the
    /// details of each failure.
    pub(crate) fn lines(&self) -> String {
        let mut text = String::new();
        for o in &self.outcomes {
            match &o.failure {
                None => {
                    let _ = writeln!(text, "examples[{}]: passed", o.index);
                }
                Some(failure) => {
                    let _ = writeln!(text, "examples[{}]: FAILED: {failure}", o.index);
                }
            }
        }
        let failures = self.failures();
        if !failures.is_empty() {
            text.push('\n');
            text.push_str(&failures);
        }
        text
    }

    /// The outcomes as the store keeps them.
    pub(crate) fn results(&self, trigger: ExampleTrigger, ran_by: &str) -> Vec<ExampleResult> {
        let now = now_ms();
        self.outcomes
            .iter()
            .map(|o| ExampleResult {
                index: o.index,
                passed: o.passed,
                actual: o.actual.clone(),
                failure: o.failure.clone(),
                trigger,
                ran_by: ran_by.to_owned(),
                ran_at_ms: now,
            })
            .collect()
    }
}

/// Runs every example of `version` in the sandbox, one after another, with no secrets, and
/// compares each result with its expectation. A stored example that no longer parses (it was
/// checked when written) fails with the reason.
pub(crate) async fn run(tools: &StoredTools, version: &NewVersion, cx: &RequestCx<'_>) -> Report {
    let output = version
        .output_schema
        .as_ref()
        .map(|s| LazySchema::new("the outputSchema", Arc::new(s.clone())));
    let mut outcomes = Vec::with_capacity(version.examples.len());
    for (index, raw) in version.examples.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let example = match parse(raw) {
            Ok(example) => example,
            Err(e) => {
                outcomes.push(Outcome {
                    index,
                    passed: false,
                    actual: "(not run)".into(),
                    failure: Some(format!("not a valid example: {e}")),
                    example: raw.clone(),
                });
                continue;
            }
        };
        let mut spec = RunSpec::new(&tools.host.env(&version.env_id), version.code.clone());
        spec.arguments = Value::Object(example.arguments.clone());
        spec.timeout = Duration::from_millis(version.limits.timeout_ms);
        spec.memory_bytes = version.limits.memory_bytes;
        spec.network = version.limits.network;
        // No secrets: `spec.env` stays empty (grants are per version and given after the
        // examples ran, and even a granted version's examples get none), and nothing is
        // redacted because nothing secret was given. No built-ins (`omniforge.call_builtin`):
        // an example is not a call of the tool. Always a cold run: a version being written has
        // no warm template, and a check should see the environment as a fresh call would.
        let (result, _) = tools
            .run(
                spec,
                None,
                output.as_ref(),
                LogFilter::AtLeast(None),
                &[],
                cx,
                None,
                None,
            )
            .await;
        let seen = match result {
            Ok(result) => Seen::of(result),
            // What a client would get for a call that produced no result: its error's text.
            Err(e) => Seen {
                text: e.to_string(),
                structured: None,
                is_error: true,
            },
        };
        let failure = seen.compare(&example.expect);
        outcomes.push(Outcome {
            index,
            passed: failure.is_none(),
            actual: seen.describe(),
            failure,
            example: raw.clone(),
        });
    }
    Report { outcomes }
}

/// A result as the comparison sees it.
struct Seen {
    text: String,
    structured: Option<Value>,
    is_error: bool,
}

impl Seen {
    fn of(result: CallToolResult) -> Seen {
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        Seen {
            text,
            structured: result.structured_content,
            is_error: result.is_error == Some(true),
        }
    }

    /// What did not hold, or `None` when every expectation held.
    fn compare(&self, expect: &Expect) -> Option<String> {
        let mut problems = Vec::new();
        let want_error = expect.is_error.unwrap_or(false);
        if self.is_error != want_error {
            problems.push(format!(
                "isError is {}, expected {want_error}",
                self.is_error
            ));
        }
        if let Some(text) = &expect.text
            && &self.text != text
        {
            problems.push("the text differs".to_owned());
        }
        if let Some(needle) = &expect.contains
            && !self.text.contains(needle.as_str())
        {
            problems.push(format!(
                "the text does not contain {}",
                cut(&Value::String(needle.clone()).to_string(), 200)
            ));
        }
        if let Some(structured) = &expect.structured
            && self.structured.as_ref() != Some(structured)
        {
            problems.push("the structuredContent differs".to_owned());
        }
        if let Some(schema) = &expect.structured_schema {
            match &self.structured {
                None => problems.push("there is no structuredContent".to_owned()),
                Some(value) => {
                    let schema = LazySchema::new("structuredSchema", Arc::new(schema.clone()));
                    if let Err(e) = schema.check(value) {
                        problems.push(format!(
                            "the structuredContent does not match structuredSchema:\n{e}"
                        ));
                    }
                }
            }
        }
        if problems.is_empty() {
            None
        } else {
            Some(problems.join("; "))
        }
    }

    /// `isError false, text "...", structuredContent {...}`, cut to what a report shows.
    fn describe(&self) -> String {
        let mut out = format!(
            "isError {}, text {}",
            self.is_error,
            Value::String(self.text.clone())
        );
        if let Some(structured) = &self.structured {
            let _ = write!(out, ", structuredContent {structured}");
        }
        cut(&out, REPORT_BYTES)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    fn expect(v: Value) -> Expect {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn examples_are_checked_before_anything_runs() {
        let schema = obj(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        );
        let ok = obj(json!({"arguments": {"n": 1}, "expect": {"contains": "2"}}));
        assert!(check(std::slice::from_ref(&ok), &schema).is_ok());
        let err = |examples: &[JsonObject]| check(examples, &schema).unwrap_err().to_string();
        assert!(
            err(&[
                ok.clone(),
                obj(json!({"arguments": {"n": 1}, "expect": {}}))
            ])
            .starts_with("examples[1].expect: give at least one"),
        );
        assert!(
            err(&[obj(
                json!({"arguments": {"n": "x"}, "expect": {"isError": false}})
            )])
            .starts_with("examples[0].arguments: do not match the inputSchema")
        );
        assert!(
            err(&[obj(json!({"arguments": {"n": 1}, "expect": {"txt": "2"}}))])
                .starts_with("examples[0]: unknown field `txt`")
        );
        assert!(
            err(&[obj(
                json!({"arguments": {"n": 1}, "expect": {"structured": {}, "structuredSchema": {}}})
            )])
            .contains("not both")
        );
        assert!(
            err(&[obj(
                json!({"arguments": {"n": 1}, "expect": {"structuredSchema": {"type": 5}}})
            )])
            .starts_with("examples[0].expect.structuredSchema: not a valid")
        );
        let many = vec![ok; MAX_EXAMPLES + 1];
        assert!(err(&many).starts_with("examples: at most 20"));
    }

    #[test]
    fn each_expectation_is_compared() {
        let seen = Seen {
            text: "4".into(),
            structured: Some(json!({"sum": 4})),
            is_error: false,
        };
        assert_eq!(seen.compare(&expect(json!({"text": "4"}))), None);
        assert_eq!(
            seen.compare(&expect(json!({"contains": "4", "structured": {"sum": 4}}))),
            None
        );
        assert_eq!(
            seen.compare(&expect(
                json!({"structuredSchema": {"type": "object", "required": ["sum"]}})
            )),
            None
        );
        assert_eq!(
            seen.compare(&expect(json!({"text": "5"}))).as_deref(),
            Some("the text differs")
        );
        assert_eq!(
            seen.compare(&expect(json!({"isError": true}))).as_deref(),
            Some("isError is false, expected true")
        );
        let failure = seen
            .compare(&expect(json!({"contains": "x", "structured": {"sum": 5}})))
            .unwrap();
        assert!(
            failure.contains("does not contain \"x\"")
                && failure.contains("structuredContent differs"),
            "{failure}"
        );
        assert!(
            seen.compare(&expect(
                json!({"structuredSchema": {"type": "object", "required": ["total"]}})
            ))
            .unwrap()
            .contains("does not match structuredSchema")
        );
        let error = Seen {
            text: "boom".into(),
            structured: None,
            is_error: true,
        };
        assert_eq!(
            error.compare(&expect(json!({"isError": true, "contains": "boom"}))),
            None
        );
        assert_eq!(
            error
                .compare(&expect(
                    json!({"structuredSchema": {"type": "object"}, "isError": true})
                ))
                .as_deref(),
            Some("there is no structuredContent")
        );
        assert_eq!(error.describe(), "isError true, text \"boom\"");
    }
}

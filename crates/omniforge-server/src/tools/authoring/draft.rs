//! The arguments of `omniforge_create_tool` and `omniforge_update_tool` (and a pack's
//! `tools` entries), and their validation into a version to store: name, schemas, examples,
//! code and description, limits, then the environment.

use std::borrow::Cow;
use std::time::Duration;

use omniforge_store::{
    Annotations, Execution, Limits, NewVersion, Runtime, TaskStart, TaskSupport, ToolVersion,
};
use rmcp::model::JsonObject;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::publish::Catalog;
use crate::context::request::RequestCx;
use crate::error::AuthoringError;
use crate::script_host::host::ScriptHost;
use crate::script_host::prepare::TimeoutRule;
use crate::tools::authoring::examples;
use crate::tools::authoring::param_headers;
use crate::tools::ops::schema::requiring;
use crate::tools::stored::shape::cut;

/// The fields of a tool version: what `omniforge_create_tool` and `omniforge_update_tool` (and
/// a pack's `tools` entries) take. An update keeps every field it leaves out from the current
/// version; to create, `description` and `code` are required too. The doc comments are the
/// inputSchema's descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Draft {
    /// Tool name: letters, digits, _ and -, at most 64.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]{1,64}$"))]
    pub(crate) name: String,
    /// What the tool does, for the model that will call it.
    description: Option<String>,
    /// Python source. Arguments arrive as JSON on stdin (or omniforge.args()); print the
    /// result.
    code: Option<String>,
    /// JSON Schema 2020-12 of the arguments; root type object. Default:
    /// {"type":"object","properties":{}}.
    #[serde(rename = "inputSchema")]
    input_schema: Option<JsonObject>,
    /// JSON Schema of the result; then stdout must be one JSON object, returned as
    /// structuredContent.
    #[serde(rename = "outputSchema")]
    output_schema: Option<JsonObject>,
    title: Option<String>,
    /// PEP 508 requirements, e.g. "python-dateutil>=2.9"; a PEP 723 # /// script block in the
    /// code is read too.
    dependencies: Option<Vec<String>>,
    annotations: Option<DraftAnnotations>,
    /// Wall-clock limit per call, seconds (default 30).
    #[schemars(extend("exclusiveMinimum" = 0))]
    timeout_s: Option<f64>,
    /// Allow network access at call time (default false).
    network: Option<bool>,
    /// Names of stored secrets to pass as environment variables.
    secrets: Option<Vec<String>>,
    /// Example calls run in the sandbox (without secrets) before the version goes live; if one
    /// fails the version is refused. Each {"arguments": {...}, "expect": {...}} with expect
    /// holding one or more of text (exact result text), contains (a substring), structured
    /// (exact structuredContent) or structuredSchema (a JSON Schema it matches), isError
    /// (default false).
    // Kept as objects: `examples::check` reads each with errors that name the example.
    #[schemars(with = "Option<Vec<examples::Example>>", length(max = examples::MAX_EXAMPLES))]
    examples: Option<Vec<JsonObject>>,
    /// Whether a call may run as a task (MCP Tasks extension) that the client polls: forbidden
    /// (default), optional (a task when the client declared the extension), required (only as
    /// a task; other clients get -32021). For work longer than a client's request timeout.
    #[serde(rename = "taskSupport")]
    task_support: Option<TaskSupportArg>,
    /// When a task call becomes a task: call (the default: the task starts with the call) or
    /// script (the call is an ordinary request, its questions input-required rounds, until the
    /// script calls omniforge.start_task(); then the client gets the task and the script goes
    /// on as it).
    #[serde(rename = "taskStart")]
    task_start: Option<TaskStartArg>,
    /// If an example fails, keep the version as a draft (never current) instead of refusing
    /// it.
    #[serde(rename = "keepFailedDrafts")]
    pub(crate) keep_failed_drafts: Option<bool>,
}

/// `omniforge_create_tool`: a whole definition (`name`, `description` and `code` required).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(crate) struct CreateTool(pub(crate) Draft);

impl JsonSchema for CreateTool {
    fn schema_name() -> Cow<'static, str> {
        "CreateTool".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        requiring(
            Draft::json_schema(generator),
            &["name", "description", "code"],
        )
    }
}

/// `omniforge_update_tool`: the fields to change, by `name`; the rest is kept.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
pub(crate) struct UpdateTool(pub(crate) Draft);

// The behaviour hints a tool version declares (MCP annotations).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DraftAnnotations {
    read_only_hint: Option<bool>,
    destructive_hint: Option<bool>,
    idempotent_hint: Option<bool>,
    open_world_hint: Option<bool>,
}

// Whether a tool's calls may run as tasks (the store's `TaskSupport`). No variant docs: they
// would turn the schema's `enum` into a `oneOf`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum TaskSupportArg {
    Forbidden,
    Optional,
    Required,
}

impl From<TaskSupportArg> for TaskSupport {
    fn from(arg: TaskSupportArg) -> TaskSupport {
        match arg {
            TaskSupportArg::Forbidden => TaskSupport::Forbidden,
            TaskSupportArg::Optional => TaskSupport::Optional,
            TaskSupportArg::Required => TaskSupport::Required,
        }
    }
}

// When a task call becomes a task (the store's `TaskStart`).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum TaskStartArg {
    Call,
    Script,
}

impl From<TaskStartArg> for TaskStart {
    fn from(arg: TaskStartArg) -> TaskStart {
        match arg {
            TaskStartArg::Call => TaskStart::Call,
            TaskStartArg::Script => TaskStart::Script,
        }
    }
}

/// The prefix of built-in tools' names, which no stored tool may use (issue 11, finding 12).
pub(crate) const RESERVED_PREFIX: &str = "omniforge_";

/// The name must be valid and not start with [`RESERVED_PREFIX`] (in any case).
///
/// # Errors
/// A text naming `name`.
pub(crate) fn check_name_shape(name: &str) -> Result<(), AuthoringError> {
    omniforge_store::validate_tool_name(name)
        .map_err(|e| AuthoringError::invalid("name", e.to_string()))?;
    let reserved = name
        .get(..RESERVED_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(RESERVED_PREFIX));
    if reserved {
        return Err(AuthoringError::invalid(
            "name",
            format!(
                "{name:?} starts with {RESERVED_PREFIX:?}, which is reserved for OmniForge's built-in tools; choose another name"
            ),
        ));
    }
    Ok(())
}

/// The name must be valid, not reserved, and not taken by a built-in or manifest tool.
///
/// # Errors
/// A text naming `name`.
pub(crate) fn check_name(catalog: &Catalog, name: &str) -> Result<(), AuthoringError> {
    check_name_shape(name)?;
    if catalog.is_reserved(name) {
        return Err(AuthoringError::invalid(
            "name",
            format!("{name:?} is taken by a built-in or manifest tool; choose another name"),
        ));
    }
    Ok(())
}

/// Validates a draft and builds its environment; returns the name and the version to store.
/// An update keeps whatever it leaves out from `previous`.
///
/// # Errors
/// A text naming the field at fault.
pub(crate) async fn prepare(
    host: &ScriptHost,
    draft: Draft,
    previous: Option<&ToolVersion>,
    cx: &RequestCx<'_>,
) -> Result<(String, NewVersion), AuthoringError> {
    let previous = previous.map(|v| &v.spec);
    let input_schema = match draft.input_schema {
        Some(schema) => schema,
        None => match previous {
            Some(p) => p.input_schema.clone(),
            None => default_input_schema(),
        },
    };
    check_tool_schema("inputSchema", &input_schema)?;
    param_headers::check(&input_schema)?;
    let examples = draft
        .examples
        .or_else(|| previous.map(|p| p.examples.clone()))
        .unwrap_or_default();
    examples::check(&examples, &input_schema)?;
    let output_schema = match draft.output_schema {
        Some(schema) => Some(schema),
        None => previous.and_then(|p| p.output_schema.clone()),
    };
    if let Some(schema) = &output_schema {
        check_tool_schema("outputSchema", schema)?;
    }
    let code = match (draft.code, previous) {
        (Some(code), _) => code,
        (None, Some(p)) => p.code.clone(),
        (None, None) => return Err(AuthoringError::invalid("code", "required to create a tool")),
    };
    let description = match (draft.description, previous) {
        (Some(description), _) => description,
        (None, Some(p)) => p.description.clone(),
        (None, None) => {
            return Err(AuthoringError::invalid(
                "description",
                "required to create a tool",
            ));
        }
    };
    let dependencies = draft
        .dependencies
        .or_else(|| previous.map(|p| p.dependencies.clone()))
        .unwrap_or_default();
    let previous_execution = previous.map(|p| p.execution).unwrap_or_default();
    let execution = Execution {
        task_support: draft
            .task_support
            .map_or(previous_execution.task_support, TaskSupport::from),
        task_start: draft
            .task_start
            .map_or(previous_execution.task_start, TaskStart::from),
    };
    let timeout = TimeoutRule {
        seconds: draft.timeout_s,
        keep: previous.map(|p| Duration::from_millis(p.limits.timeout_ms)),
    };
    let progress = cx.progress();
    let prepared = host
        .prepare("code", &code, dependencies, timeout, &progress)
        .await?;
    let annotations = draft.annotations.map_or_else(
        || previous.map(|p| p.annotations).unwrap_or_default(),
        |a| Annotations {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        },
    );
    let version = NewVersion {
        title: draft
            .title
            .or_else(|| previous.and_then(|p| p.title.clone())),
        description,
        input_schema,
        output_schema,
        annotations,
        runtime: Runtime::Python,
        code,
        dependencies: prepared.dependencies,
        limits: Limits {
            timeout_ms: u64::try_from(prepared.timeout.as_millis()).unwrap_or(u64::MAX),
            memory_bytes: host.settings().memory_bytes,
            network: draft
                .network
                .or(previous.map(|p| p.limits.network))
                .unwrap_or(false),
        },
        lock: prepared.lock.requirements,
        env_id: prepared.lock.env_id,
        secrets: draft
            .secrets
            .or_else(|| previous.map(|p| p.secrets.clone()))
            .unwrap_or_default(),
        author: cx.author().to_owned(),
        examples,
        execution,
    };
    Ok((draft.name, version))
}

fn default_input_schema() -> JsonObject {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), json!({}));
    schema
}

/// A tool schema must compile as JSON Schema 2020-12, have root `type: object`, and resolve
/// every reference within itself.
///
/// # Errors
/// A text naming `field`.
pub(crate) fn check_tool_schema(
    field: &'static str,
    schema: &JsonObject,
) -> Result<(), AuthoringError> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(AuthoringError::invalid(
            field,
            format!(
                "the root must be {{\"type\": \"object\", ...}} (MCP tools take and return JSON objects); got {}",
                cut(&Value::Object(schema.clone()).to_string(), 200)
            ),
        ));
    }
    if let Some(dialect) = schema.get("$schema").and_then(Value::as_str)
        && !dialect.contains("2020-12")
    {
        return Err(AuthoringError::invalid(
            field,
            format!("$schema must be JSON Schema 2020-12, got {dialect:?}"),
        ));
    }
    jsonschema::draft202012::options()
        .build(&Value::Object(schema.clone()))
        .map(|_| ())
        .map_err(|e| {
            AuthoringError::invalid(field, format!("not a valid JSON Schema 2020-12: {e}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_must_be_objects_and_valid() {
        let ok = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}});
        assert!(check_tool_schema("inputSchema", ok.as_object().unwrap()).is_ok());
        let not_object = json!({"anyOf": [{"type": "object"}]});
        let err = check_tool_schema("inputSchema", not_object.as_object().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("inputSchema: the root must be"), "{err}");
        let dangling = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}});
        let err = check_tool_schema("outputSchema", dangling.as_object().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("outputSchema: not a valid JSON Schema"),
            "{err}"
        );
        let remote =
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}});
        assert!(check_tool_schema("inputSchema", remote.as_object().unwrap()).is_err());
    }

    #[test]
    fn omniforge_prefix_is_reserved_for_builtins() {
        for name in [
            "omniforge_x",
            "OmniForge_x",
            "OMNIFORGE_instructions",
            "omniforge_",
        ] {
            let err = check_name_shape(name).unwrap_err().to_string();
            assert!(
                err.starts_with("name: ") && err.contains("reserved"),
                "{name}: {err}"
            );
        }
        for name in [
            "omniforge",
            "omniforgex",
            "my_omniforge_tool",
            "omniforge-x",
        ] {
            assert!(check_name_shape(name).is_ok(), "{name}");
        }
    }
}

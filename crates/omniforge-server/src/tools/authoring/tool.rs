//! The tool authoring built-ins: `omniforge_create_tool`, `omniforge_update_tool`,
//! `omniforge_delete_tool`, `omniforge_get_tool`, `omniforge_rollback_tool` and
//! `omniforge_test_tool`. A write updates the written tool's catalog entry only.

use std::sync::{Arc, Weak};

use omniforge_script::RunSpec;
use omniforge_store::{CallOutcome, CallRecord, NewStatus, Store, StoredTool, ToolVersion};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::catalog::call::{Call, CallFuture, CallResult, ToolCall, running};
use crate::catalog::entry::{Entry, object_schema};
use crate::catalog::publish::Catalog;
use crate::context::request::{LogFilter, RequestCx};
use crate::error::{AuthoringError, parse_arguments};
use crate::script_host::prepare::TimeoutRule;
use crate::tools::authoring::draft::{self, Draft};
use crate::tools::authoring::secret;
use crate::tools::stored::call::StoredTools;
use crate::tools::stored::source::StoredSource;

/// Create a tool (version 1).
pub(crate) const CREATE: &str = "omniforge_create_tool";
/// Add a version to a tool.
pub(crate) const UPDATE: &str = "omniforge_update_tool";

/// What the tool built-ins work with.
pub(crate) struct ToolAuthoring {
    store: Arc<dyn Store>,
    tools: Arc<StoredTools>,
    source: Arc<StoredSource>,
    /// For the names built-in and manifest tools reserve. Weak: the catalog's entries hold
    /// this value.
    catalog: Weak<Catalog>,
}

/// One tool built-in.
#[derive(Debug, Clone, Copy)]
enum Op {
    Create,
    Update,
    Delete,
    Get,
    Rollback,
    Test,
}

struct ToolBuiltin {
    op: Op,
    authoring: Arc<ToolAuthoring>,
}

impl ToolCall for ToolBuiltin {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        running(async move {
            let a = &self.authoring;
            match self.op {
                Op::Create => a.create_or_update(call.arguments, call.cx, true).await,
                Op::Update => a.create_or_update(call.arguments, call.cx, false).await,
                Op::Delete => a.delete(call.arguments, call.cx).await,
                Op::Get => a.get(call.arguments).await,
                Op::Rollback => a.rollback(call.arguments, call.cx).await,
                Op::Test => a.test(call.arguments, call.cx).await,
            }
        })
    }
}

fn text(text: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

impl ToolAuthoring {
    /// The tool built-ins over `store`, publishing through `source`.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        tools: Arc<StoredTools>,
        source: Arc<StoredSource>,
        catalog: &Arc<Catalog>,
    ) -> ToolAuthoring {
        ToolAuthoring {
            store,
            tools,
            source,
            catalog: Arc::downgrade(catalog),
        }
    }

    fn check_name(&self, name: &str) -> Result<(), AuthoringError> {
        match self.catalog.upgrade() {
            Some(catalog) => draft::check_name(&catalog, name),
            None => draft::check_name_shape(name),
        }
    }

    /// Creates a tool (`create`) or adds a version, from the arguments of
    /// `omniforge_create_tool` / `omniforge_update_tool`.
    ///
    /// # Errors
    /// A text naming the field at fault, or the store failed.
    pub(crate) async fn create_or_update(
        &self,
        arguments: JsonObject,
        cx: &RequestCx<'_>,
        create: bool,
    ) -> CallResult {
        let draft: Draft = parse_arguments(arguments)?;
        self.check_name(&draft.name)?;
        let existing = self
            .store
            .get(&draft.name)
            .await
            .map_err(AuthoringError::from)?;
        match (create, &existing) {
            (true, Some(_)) => {
                return Err(AuthoringError::invalid(
                    "name",
                    format!(
                        "a tool named {:?} already exists; use omniforge_update_tool to add a version",
                        draft.name
                    ),
                )
                .into());
            }
            (false, None) => {
                return Err(AuthoringError::invalid(
                    "name",
                    format!("no tool named {:?}; use omniforge_create_tool", draft.name),
                )
                .into());
            }
            _ => {}
        }
        let previous = existing.as_ref().map(|t| &t.current);
        let (name, spec) = draft::prepare(&self.tools.host, draft, previous, cx).await?;
        let version = if create {
            self.store
                .create_tool(&cx.actor(), &name, spec, NewStatus::Live)
                .await
        } else {
            self.store
                .add_version(&cx.actor(), &name, spec, NewStatus::Live)
                .await
        }
        .map_err(AuthoringError::from)?;
        let pending = secret::grant_declared(&*self.store, cx, &name, version.number)
            .await
            .map_err(AuthoringError::from)?;
        self.source
            .reload_and_prepare(&name, cx.author())
            .await
            .map_err(AuthoringError::from)?;
        let verb = if create { "Created" } else { "Updated" };
        let mut sentence = format!(
            "{verb} tool {name} (version {}). It is listed in tools/list now; clients that ignore \
             notifications/tools/list_changed can call it with omniforge_call_tool.",
            version.number
        );
        if !pending.is_empty() {
            sentence.push_str(&format!(
                " Secrets {} are requested, not granted: this version runs without them until \
                 an admin grants them to it (omniforge_grant_secret).",
                pending.join(", ")
            ));
        }
        Ok(text(sentence))
    }

    /// Validates `omniforge_create_tool` arguments and builds the tool's environment, without
    /// storing anything; returns the name and the version a pack import would store. Fields
    /// left out get their defaults (a pack entry is a whole definition).
    ///
    /// # Errors
    /// The same texts as `omniforge_create_tool` (`name: ...`, `inputSchema: ...`, ...).
    pub(crate) async fn prepare(
        &self,
        arguments: JsonObject,
        cx: &RequestCx<'_>,
    ) -> Result<(String, omniforge_store::NewVersion), AuthoringError> {
        let draft: Draft = parse_arguments(arguments)?;
        self.check_name(&draft.name)?;
        draft::prepare(&self.tools.host, draft, None, cx).await
    }

    async fn delete(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
            #[serde(default)]
            purge: bool,
        }
        let args: Args = parse_arguments(arguments)?;
        if args.purge {
            self.store.purge(&cx.actor(), &args.name).await
        } else {
            self.store.set_enabled(&cx.actor(), &args.name, false).await
        }
        .map_err(AuthoringError::from)?;
        self.source
            .reload(&args.name)
            .await
            .map_err(AuthoringError::from)?;
        Ok(text(if args.purge {
            format!("Purged tool {} and its history.", args.name)
        } else {
            format!(
                "Disabled tool {}; its versions are kept (omniforge_get_tool shows them, \
                 omniforge_rollback_tool enables it again).",
                args.name
            )
        }))
    }

    async fn rollback(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
            version: u32,
        }
        let args: Args = parse_arguments(arguments)?;
        self.store
            .rollback(&cx.actor(), &args.name, args.version)
            .await
            .map_err(AuthoringError::from)?;
        self.store
            .set_enabled(&cx.actor(), &args.name, true)
            .await
            .map_err(AuthoringError::from)?;
        self.source
            .reload_and_prepare(&args.name, cx.author())
            .await
            .map_err(AuthoringError::from)?;
        Ok(text(format!(
            "Tool {} now runs version {} and is enabled.",
            args.name, args.version
        )))
    }

    async fn get(&self, arguments: JsonObject) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
        }
        let args: Args = parse_arguments(arguments)?;
        let Some(stored) = self
            .store
            .get(&args.name)
            .await
            .map_err(AuthoringError::from)?
        else {
            return Err(
                AuthoringError::invalid("name", format!("no tool named {:?}", args.name)).into(),
            );
        };
        let versions = self
            .store
            .versions(&args.name)
            .await
            .map_err(AuthoringError::from)?;
        let calls = self
            .store
            .recent_calls(&args.name, RECENT_CALLS)
            .await
            .map_err(AuthoringError::from)?;
        let mut view = describe_tool(&stored, &versions);
        view["recentCalls"] = calls.iter().map(call_json).collect();
        let mut result = text(serde_json::to_string_pretty(&view).unwrap_or_default());
        result.structured_content = Some(view);
        Ok(result)
    }

    async fn test(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            code: String,
            #[serde(default)]
            arguments: Option<JsonObject>,
            #[serde(default)]
            dependencies: Option<Vec<String>>,
            #[serde(default)]
            timeout_s: Option<f64>,
            #[serde(default)]
            network: Option<bool>,
        }
        let args: Args = parse_arguments(arguments)?;
        let host = &self.tools.host;
        let progress = cx.progress();
        let timeout = TimeoutRule {
            seconds: args.timeout_s,
            keep: None,
        };
        let prepared = host
            .prepare(
                "code",
                &args.code,
                args.dependencies.unwrap_or_default(),
                timeout,
                &progress,
            )
            .await?;
        drop(progress);
        let mut spec = RunSpec::new(&prepared.env, args.code);
        spec.arguments = Value::Object(args.arguments.unwrap_or_default());
        spec.timeout = prepared.timeout;
        spec.memory_bytes = host.settings().memory_bytes;
        spec.network = args.network.unwrap_or(false);
        self.tools
            .run(spec, None, None, LogFilter::AtLeast(None), &[], cx, None)
            .await
            .0
    }
}

/// How many of a tool's latest calls `omniforge_get_tool` shows.
const RECENT_CALLS: u32 = 20;

/// One call of the call log as `omniforge_get_tool` shows it (issue 11, finding 12): time,
/// principal, version, duration, outcome, exit status and the failure's reason.
pub fn call_json(call: &CallRecord) -> Value {
    let (outcome, exit) = match call.outcome {
        CallOutcome::Ok => ("ok", None),
        CallOutcome::Error => ("error", None),
        CallOutcome::Exit(n) => ("exit", Some(n)),
        CallOutcome::Timeout => ("timeout", None),
        CallOutcome::Cancelled => ("cancelled", None),
        _ => ("other", None),
    };
    json!({
        "startedAtMs": call.started_at_ms,
        "principal": call.principal,
        "version": call.version,
        "durationMs": call.duration_ms,
        "outcome": outcome,
        "exitCode": exit,
        "error": call.error,
    })
}

/// What `omniforge_get_tool` and `omniforge tool show` print: a stored tool's current version
/// (code, schemas, dependencies, lock, limits, secret names) and its versions. Never secret
/// values.
pub fn describe_tool(stored: &StoredTool, versions: &[ToolVersion]) -> Value {
    let spec = &stored.current.spec;
    json!({
        "name": stored.tool.name,
        "enabled": stored.tool.enabled,
        "currentVersion": stored.tool.current_version,
        "title": spec.title,
        "description": spec.description,
        "code": spec.code,
        "inputSchema": spec.input_schema,
        "outputSchema": spec.output_schema,
        "dependencies": spec.dependencies,
        "lock": spec.lock,
        "limits": {"timeout_s": spec.limits.timeout_ms as f64 / 1000.0, "memory_bytes": spec.limits.memory_bytes, "network": spec.limits.network},
        "secrets": spec.secrets,
        "versions": versions.iter().map(|v| json!({
            "number": v.number,
            "createdAtMs": v.created_at_ms,
            "author": v.spec.author,
            "description": v.spec.description,
        })).collect::<Vec<_>>(),
    })
}

/// The tool built-ins, in catalog order.
pub(crate) fn entries(authoring: &Arc<ToolAuthoring>) -> Vec<Entry> {
    let draft_properties = json!({
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$", "description": "Tool name: letters, digits, _ and -, at most 64."},
        "description": {"type": "string", "description": "What the tool does, for the model that will call it."},
        "code": {"type": "string", "description": "Python source. Arguments arrive as JSON on stdin (or omniforge.args()); print the result."},
        "inputSchema": {"type": "object", "description": "JSON Schema 2020-12 of the arguments; root type object. Default: {\"type\":\"object\",\"properties\":{}}."},
        "outputSchema": {"type": "object", "description": "JSON Schema of the result; then stdout must be one JSON object, returned as structuredContent."},
        "title": {"type": "string"},
        "dependencies": {"type": "array", "items": {"type": "string"}, "description": "PEP 508 requirements, e.g. \"python-dateutil>=2.9\"; a PEP 723 # /// script block in the code is read too."},
        "annotations": {"type": "object", "properties": {
            "readOnlyHint": {"type": "boolean"}, "destructiveHint": {"type": "boolean"},
            "idempotentHint": {"type": "boolean"}, "openWorldHint": {"type": "boolean"}}, "additionalProperties": false},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "Wall-clock limit per call, seconds (default 30)."},
        "network": {"type": "boolean", "description": "Allow network access at call time (default false)."},
        "secrets": {"type": "array", "items": {"type": "string"}, "description": "Names of stored secrets to pass as environment variables."}
    });
    let draft_schema = |required: &[&str]| {
        object_schema(json!({
            "type": "object", "properties": draft_properties.clone(), "required": required, "additionalProperties": false
        }))
    };
    let entry = |op: Op,
                 name: &'static str,
                 description: &'static str,
                 schema: Arc<JsonObject>,
                 annotations: ToolAnnotations| {
        let call = Arc::new(ToolBuiltin {
            op,
            authoring: authoring.clone(),
        });
        Entry::builtin(name, description, schema, annotations, Scope::Write, call)
    };
    vec![
        entry(
            Op::Create,
            CREATE,
            "Create a new tool from Python code (version 1). Validates the name, schemas and code, installs the dependencies (progress is reported), stores it and announces tools/list_changed. Call omniforge_instructions first for the authoring guide.",
            draft_schema(&["name", "description", "code"]),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        entry(
            Op::Update,
            UPDATE,
            "Add a new version of an existing tool (same fields as omniforge_create_tool; every field left out but name - description, code, schemas, title, dependencies, annotations, timeout_s, network, secrets - is kept from the current version).",
            draft_schema(&["name"]),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        entry(
            Op::Delete,
            "omniforge_delete_tool",
            "Disable a tool, keeping its history; with purge: true, remove it and its history for good.",
            object_schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}, "purge": {"type": "boolean", "default": false}}, "required": ["name"], "additionalProperties": false}),
            ),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        ),
        entry(
            Op::Get,
            "omniforge_get_tool",
            "Show a stored tool: its source, schemas, dependencies, lock, limits, versions and latest calls (time, principal, version, duration, outcome, error).",
            object_schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}),
            ),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        entry(
            Op::Rollback,
            "omniforge_rollback_tool",
            "Make an earlier version of a tool current (and enable the tool).",
            object_schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "integer", "minimum": 1}}, "required": ["name", "version"], "additionalProperties": false}),
            ),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        entry(
            Op::Test,
            "omniforge_test_tool",
            "Run Python code once with the given arguments in the same sandbox, without saving anything.",
            object_schema(json!({"type": "object", "properties": {
                "code": {"type": "string"}, "arguments": {"type": "object"},
                "dependencies": {"type": "array", "items": {"type": "string"}},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0}, "network": {"type": "boolean"}},
                "required": ["code"], "additionalProperties": false})),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
    ]
}

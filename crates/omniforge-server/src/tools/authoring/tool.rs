//! The tool authoring built-ins: `omniforge_create_tool`, `omniforge_update_tool`,
//! `omniforge_delete_tool`, `omniforge_get_tool`, `omniforge_rollback_tool`,
//! `omniforge_test_tool` and `omniforge_check_tool`. A write runs the version's examples first
//! (`examples.rs`) and updates the written tool's catalog entry only.

use std::sync::{Arc, Weak};

use omniforge_script::RunSpec;
use omniforge_store::{
    CallOutcome, CallRecord, ExampleTrigger, NewStatus, Store, StoredTool, ToolVersion,
    VersionStatus,
};
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
use crate::tools::authoring::approval::{self, Approval};
use crate::tools::authoring::draft::{self, Draft};
use crate::tools::authoring::examples;
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
    /// Whether a version whose examples fail is kept as a draft (`--keep-failed-drafts`)
    /// rather than refused, unless a call says otherwise.
    keep_failed_drafts: bool,
    /// The approval gate: whether a version that passed its examples goes live or waits.
    approval: Arc<Approval>,
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
    Check,
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
                Op::Get => a.get(call.arguments, call.cx).await,
                Op::Rollback => a.rollback(call.arguments, call.cx).await,
                Op::Test => a.test(call.arguments, call.cx).await,
                Op::Check => a.check(call.arguments, call.cx).await,
            }
        })
    }
}

fn text(text: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

impl ToolAuthoring {
    /// The tool built-ins over `store`, publishing through `source`; `keep_failed_drafts`:
    /// the default of `keepFailedDrafts`; `approval`: the gate new versions pass.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        tools: Arc<StoredTools>,
        source: Arc<StoredSource>,
        catalog: &Arc<Catalog>,
        keep_failed_drafts: bool,
        approval: Arc<Approval>,
    ) -> ToolAuthoring {
        ToolAuthoring {
            store,
            tools,
            source,
            catalog: Arc::downgrade(catalog),
            keep_failed_drafts,
            approval,
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
        let keep_failed = draft.keep_failed_drafts.unwrap_or(self.keep_failed_drafts);
        self.check_name(&draft.name)?;
        // A tool whose versions are all drafts (or pending) exists without a current version.
        let exists = self
            .store
            .tool(&draft.name)
            .await
            .map_err(AuthoringError::from)?
            .is_some();
        match (create, exists) {
            (true, true) => {
                return Err(AuthoringError::invalid(
                    "name",
                    format!(
                        "a tool named {:?} already exists; use omniforge_update_tool to add a version",
                        draft.name
                    ),
                )
                .into());
            }
            (false, false) => {
                return Err(AuthoringError::invalid(
                    "name",
                    format!("no tool named {:?}; use omniforge_create_tool", draft.name),
                )
                .into());
            }
            _ => {}
        }
        let existing = if exists {
            self.store
                .get(&draft.name)
                .await
                .map_err(AuthoringError::from)?
        } else {
            None
        };
        let previous = existing.as_ref().map(|t| &t.current);
        let (name, spec) = draft::prepare(&self.tools.host, draft, previous, cx).await?;
        let report = examples::run(&self.tools, &spec, cx).await;
        let failed = report.failed();
        let status = match (failed, keep_failed) {
            (0, _) => self.approval.status_for(cx),
            (_, true) => NewStatus::Draft {
                reason: format!("{}\n{}", report.summary(), report.failures()),
            },
            (_, false) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "Refused: {} of the tool's examples failed ({}); nothing was stored and the \
                     current version is unchanged. Fix the code or the examples and try again \
                     (keepFailedDrafts: true, or --keep-failed-drafts on the command line, keeps a \
                     failing version as a draft).\n\n{}",
                    failed,
                    report.summary(),
                    report.failures()
                ))]));
            }
        };
        let (live, pending) = (status == NewStatus::Live, status == NewStatus::Pending);
        let version = if create {
            self.store
                .create_tool(&cx.actor(), &name, spec, status)
                .await
        } else {
            self.store
                .add_version(&cx.actor(), &name, spec, status)
                .await
        }
        .map_err(AuthoringError::from)?;
        let trigger = if create {
            ExampleTrigger::Create
        } else {
            ExampleTrigger::Update
        };
        self.record(&name, version.number, &report, trigger, cx)
            .await;
        // Grants are per version, given after the examples ran: an example run never has a
        // secret, whoever the author.
        let pending_secrets = secret::grant_declared(&*self.store, cx, &name, version.number)
            .await
            .map_err(AuthoringError::from)?;
        self.source
            .reload_and_prepare(&name, cx.author())
            .await
            .map_err(AuthoringError::from)?;
        let checked = if report.is_empty() {
            String::new()
        } else {
            format!(" {}.", report.summary())
        };
        if pending {
            cx.tell_tool_list_changed();
            return Ok(text(approval::submitted_sentence(
                &version,
                &checked,
                &pending_secrets,
            )));
        }
        if !live {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "Kept as draft version {} of tool {name}: {}; it is not current and is not \
                 served (the current version, if any, is unchanged).\n\n{}",
                version.number,
                report.summary(),
                report.failures()
            ))]));
        }
        let verb = if create { "Created" } else { "Updated" };
        let mut sentence = format!(
            "{verb} tool {name} (version {}).{checked} It is listed in tools/list now; clients \
             that ignore notifications/tools/list_changed can call it with omniforge_call_tool.",
            version.number
        );
        if !pending_secrets.is_empty() {
            sentence.push_str(&format!(
                " Secrets {} are requested, not granted: this version runs without them until \
                 an admin grants them to it (omniforge_grant_secret).",
                pending_secrets.join(", ")
            ));
        }
        Ok(text(sentence))
    }

    /// Stores the outcome of an examples run (a failure to store is logged: the run's answer
    /// stands).
    async fn record(
        &self,
        name: &str,
        number: u32,
        report: &examples::Report,
        trigger: ExampleTrigger,
        cx: &RequestCx<'_>,
    ) {
        if report.is_empty() {
            return;
        }
        if let Err(error) = self
            .store
            .record_example_results(name, number, report.results(trigger, cx.author()))
            .await
        {
            tracing::warn!(%error, tool = name, version = number, "recording example results failed");
        }
    }

    /// Validates `omniforge_create_tool` arguments, builds the tool's environment and runs its
    /// examples, without storing anything; returns the name, the version a pack import would
    /// store and the examples' outcome (to record once the version is stored). Fields left out
    /// get their defaults (a pack entry is a whole definition).
    ///
    /// # Errors
    /// The same texts as `omniforge_create_tool` (`name: ...`, `inputSchema: ...`, ...);
    /// `examples: ...` with each failing example (a pack is all or nothing: no drafts).
    pub(crate) async fn prepare(
        &self,
        arguments: JsonObject,
        cx: &RequestCx<'_>,
    ) -> Result<(String, omniforge_store::NewVersion, examples::Report), AuthoringError> {
        let draft: Draft = parse_arguments(arguments)?;
        if draft.keep_failed_drafts.is_some() {
            return Err(AuthoringError::invalid(
                "keepFailedDrafts",
                "not allowed in a pack (an import is all or nothing)",
            ));
        }
        self.check_name(&draft.name)?;
        let (name, spec) = draft::prepare(&self.tools.host, draft, None, cx).await?;
        let report = examples::run(&self.tools, &spec, cx).await;
        if report.failed() > 0 {
            return Err(AuthoringError::invalid(
                "examples",
                format!("{}\n{}", report.summary(), report.failures()),
            ));
        }
        Ok((name, spec, report))
    }

    /// Records the examples' outcome of tools a pack import stored (`prepared`: what
    /// [`prepare`](ToolAuthoring::prepare) returned), for each tool whose current version is
    /// now the prepared definition.
    pub(crate) async fn record_imported(
        &self,
        prepared: &[(String, omniforge_store::NewVersion, examples::Report)],
        cx: &RequestCx<'_>,
    ) {
        for (name, spec, report) in prepared {
            if report.is_empty() {
                continue;
            }
            if let Ok(Some(stored)) = self.store.get(name).await
                && stored.current.spec.code == spec.code
                && stored.current.spec.examples == spec.examples
                && stored.current.spec.env_id == spec.env_id
                && stored.current.spec.output_schema == spec.output_schema
            {
                self.record(
                    name,
                    stored.current.number,
                    report,
                    ExampleTrigger::Import,
                    cx,
                )
                .await;
            }
        }
    }

    pub(crate) async fn delete(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
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

    /// Makes a live version current (and enables the tool), after running its examples unless
    /// `force`; refused with the failures when one fails.
    ///
    /// # Errors
    /// The arguments are wrong, or the store refused or failed.
    pub(crate) async fn rollback(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
            version: u32,
            #[serde(default)]
            force: bool,
        }
        let args: Args = parse_arguments(arguments)?;
        let target = self
            .store
            .version(&args.name, args.version)
            .await
            .map_err(AuthoringError::from)?;
        let mut checked = String::new();
        // Only a live version can become current; the store refuses the others below.
        if !args.force
            && target.state.status == VersionStatus::Live
            && !target.spec.examples.is_empty()
        {
            let report = examples::run(&self.tools, &target.spec, cx).await;
            self.record(
                &args.name,
                args.version,
                &report,
                ExampleTrigger::Rollback,
                cx,
            )
            .await;
            if report.failed() > 0 {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "Rollback refused: version {} of tool {} fails its examples ({}); the current \
                     version is unchanged. force: true rolls back without running them.\n\n{}",
                    args.version,
                    args.name,
                    report.summary(),
                    report.failures()
                ))]));
            }
            checked = format!(" {}.", report.summary());
        }
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
            "Tool {} now runs version {} and is enabled.{checked}",
            args.name, args.version
        )))
    }

    /// Runs the examples of a stored version (the current one unless `version` is given)
    /// against its environment as it is now, and records the outcome; an `isError` result when
    /// one fails. One line per example, then the details of each failure.
    ///
    /// # Errors
    /// The arguments are wrong, or the store refused or failed.
    pub(crate) async fn check(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
            #[serde(default)]
            version: Option<u32>,
        }
        let args: Args = parse_arguments(arguments)?;
        let number = match args.version {
            Some(n) => n,
            None => self
                .store
                .tool(&args.name)
                .await
                .map_err(AuthoringError::from)?
                .ok_or_else(|| {
                    AuthoringError::invalid("name", format!("no tool named {:?}", args.name))
                })?
                .current_version
                .ok_or_else(|| {
                    AuthoringError::invalid(
                        "version",
                        format!("tool {:?} has no current version; name one", args.name),
                    )
                })?,
        };
        let version = self
            .store
            .version(&args.name, number)
            .await
            .map_err(AuthoringError::from)?;
        if version.spec.examples.is_empty() {
            return Ok(text(format!(
                "Version {number} of tool {} has no examples.",
                args.name
            )));
        }
        let report = examples::run(&self.tools, &version.spec, cx).await;
        self.record(&args.name, number, &report, ExampleTrigger::Check, cx)
            .await;
        let body = format!(
            "Tool {} version {number}: {}.\n{}",
            args.name,
            report.summary(),
            report.lines()
        );
        Ok(if report.failed() > 0 {
            CallToolResult::error(vec![ContentBlock::text(body)])
        } else {
            text(body)
        })
    }

    async fn get(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
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
        let mut versions = self
            .store
            .versions(&args.name)
            .await
            .map_err(AuthoringError::from)?;
        // A pending version is shown to its author and admins only (issue 17).
        if !cx.allows(Scope::Admin) {
            versions.retain(|v| {
                v.state.status != VersionStatus::Pending || v.spec.author == cx.author()
            });
        }
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
            .run(
                spec,
                None,
                None,
                LogFilter::AtLeast(None),
                &[],
                cx,
                None,
                None,
            )
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
        "examples": spec.examples,
        "taskSupport": spec.execution.task_support.as_str(),
        "taskStart": spec.execution.task_start.as_str(),
        "versions": versions.iter().map(|v| json!({
            "number": v.number,
            "status": v.state.status.as_str(),
            "statusReason": v.state.reason,
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
        "secrets": {"type": "array", "items": {"type": "string"}, "description": "Names of stored secrets to pass as environment variables."},
        "examples": {"type": "array", "maxItems": examples::MAX_EXAMPLES, "description": "Example calls run in the sandbox (without secrets) before the version goes live; if one fails the version is refused. Each {\"arguments\": {...}, \"expect\": {...}} with expect holding one or more of text (exact result text), contains (a substring), structured (exact structuredContent) or structuredSchema (a JSON Schema it matches), isError (default false).",
            "items": {"type": "object", "properties": {"arguments": {"type": "object"}, "expect": {"type": "object", "properties": {
                "text": {"type": "string"}, "contains": {"type": "string"}, "structured": {"type": "object"},
                "structuredSchema": {"type": "object"}, "isError": {"type": "boolean"}}, "additionalProperties": false}},
                "required": ["expect"], "additionalProperties": false}},
        "taskSupport": {"type": "string", "enum": ["forbidden", "optional", "required"], "description": "Whether a call may run as a task (MCP Tasks extension) that the client polls: forbidden (default), optional (a task when the client declared the extension), required (only as a task; other clients get -32021). For work longer than a client's request timeout."},
        "taskStart": {"type": "string", "enum": ["call", "script"], "description": "When a task call becomes a task: call (the default: the task starts with the call) or script (the call is an ordinary request, its questions input-required rounds, until the script calls omniforge.start_task(); then the client gets the task and the script goes on as it)."},
        "keepFailedDrafts": {"type": "boolean", "description": "If an example fails, keep the version as a draft (never current) instead of refusing it."}
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
            "Add a new version of an existing tool (same fields as omniforge_create_tool; every field left out but name - description, code, schemas, title, dependencies, annotations, timeout_s, network, secrets, taskSupport, taskStart - is kept from the current version).",
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
            "Make an earlier version of a tool current (and enable the tool). Its examples run first and a failing one refuses the rollback, unless force: true.",
            object_schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "integer", "minimum": 1}, "force": {"type": "boolean", "default": false}}, "required": ["name", "version"], "additionalProperties": false}),
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
        entry(
            Op::Check,
            "omniforge_check_tool",
            "Run a stored tool version's examples again (the current version unless version is given), e.g. after an environment rebuild, and record the results. An error result lists each failing example with expected and actual.",
            object_schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "integer", "minimum": 1}}, "required": ["name"], "additionalProperties": false}),
            ),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
    ]
}

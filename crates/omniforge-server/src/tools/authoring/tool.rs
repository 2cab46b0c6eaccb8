//! The tool authoring built-ins: `omniforge_create_tool`, `omniforge_update_tool`,
//! `omniforge_delete_tool`, `omniforge_get_tool`, `omniforge_rollback_tool`,
//! `omniforge_test_tool` and `omniforge_check_tool`. A write runs the version's examples first
//! (`examples.rs`) and updates the written tool's catalog entry only.

use std::sync::{Arc, Weak};

use omniforge_script::RunSpec;
use omniforge_store::{ExampleTrigger, NewStatus, Store, VersionStatus};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Scope;
use crate::catalog::call::{Call, CallFuture, CallResult, ToolCall, running};
use crate::catalog::entry::Entry;
use crate::catalog::publish::Catalog;
use crate::context::actor::Actor;
use crate::context::request::{LogFilter, RequestCx};
use crate::error::{AuthoringError, parse_arguments};
use crate::script_host::prepare::TimeoutRule;
use crate::tools::authoring::approval::{self, Approval};
use crate::tools::authoring::draft::{self, CreateTool, Draft, UpdateTool};
use crate::tools::authoring::examples;
use crate::tools::authoring::secret;
use crate::tools::ops::mcp::{builtin, entry};
use crate::tools::ops::{Hints, Operation, Outcome, ToolDef};
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

impl Operation for CreateTool {
    type Service = ToolAuthoring;
    const TOOL: ToolDef = ToolDef {
        name: CREATE,
        title: None,
        description: "Create a new tool from Python code (version 1). Validates the name, schemas and code, installs the dependencies (progress is reported), stores it and announces tools/list_changed. Call omniforge_instructions first for the authoring guide.",
        scope: Scope::Write,
        hints: Hints::WRITE,
    };

    async fn apply(
        self,
        tools: &ToolAuthoring,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        tools.create_or_update(self.0, actor.cx, true).await
    }
}

impl Operation for UpdateTool {
    type Service = ToolAuthoring;
    const TOOL: ToolDef = ToolDef {
        name: UPDATE,
        title: None,
        description: "Add a new version of an existing tool (same fields as omniforge_create_tool; every field left out but name - description, code, schemas, title, dependencies, annotations, timeout_s, network, secrets, taskSupport, taskStart - is kept from the current version).",
        scope: Scope::Write,
        hints: Hints::WRITE,
    };

    async fn apply(
        self,
        tools: &ToolAuthoring,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        tools.create_or_update(self.0, actor.cx, false).await
    }
}

/// `omniforge_delete_tool`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteTool {
    name: String,
    #[serde(default)]
    purge: bool,
}

impl DeleteTool {
    /// Disable tool `name`, keeping its versions.
    pub(crate) fn disable(name: &str) -> DeleteTool {
        DeleteTool {
            name: name.to_owned(),
            purge: false,
        }
    }
}

impl Operation for DeleteTool {
    type Service = ToolAuthoring;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_delete_tool",
        title: None,
        description: "Disable a tool, keeping its history; with purge: true, remove it and its history for good.",
        scope: Scope::Write,
        hints: Hints::closed(false, true, true),
    };

    async fn apply(
        self,
        tools: &ToolAuthoring,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        tools.delete(&self.name, self.purge, actor.cx).await
    }
}

/// `omniforge_get_tool`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetTool {
    name: String,
}

impl Operation for GetTool {
    type Service = ToolAuthoring;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_get_tool",
        title: None,
        description: "Show a stored tool: its source, schemas, dependencies, lock, limits, versions and latest calls (time, principal, version, duration, outcome, error).",
        scope: Scope::Write,
        hints: Hints::READ,
    };

    async fn apply(
        self,
        tools: &ToolAuthoring,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        tools.get(&self.name, actor.cx).await
    }
}

/// `omniforge_rollback_tool`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RollbackTool {
    name: String,
    #[schemars(range(min = 1))]
    version: u32,
    #[serde(default)]
    force: bool,
}

impl RollbackTool {
    /// Make live `version` of tool `name` current, after its examples unless `force`.
    pub(crate) fn new(name: &str, version: u32, force: bool) -> RollbackTool {
        RollbackTool {
            name: name.to_owned(),
            version,
            force,
        }
    }
}

impl Operation for RollbackTool {
    type Service = ToolAuthoring;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_rollback_tool",
        title: None,
        description: "Make an earlier version of a tool current (and enable the tool). Its examples run first and a failing one refuses the rollback, unless force: true.",
        scope: Scope::Write,
        hints: Hints::closed(false, false, true),
    };

    async fn apply(
        self,
        tools: &ToolAuthoring,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        tools.rollback(self, actor.cx).await
    }
}

/// `omniforge_test_tool`: code run once, nothing stored. Not an [`Operation`]: it answers with
/// the run's own result, as a client gets a tool's.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestTool {
    code: String,
    arguments: Option<JsonObject>,
    dependencies: Option<Vec<String>>,
    #[schemars(extend("exclusiveMinimum" = 0))]
    timeout_s: Option<f64>,
    network: Option<bool>,
}

impl TestTool {
    /// How it is listed.
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_test_tool",
        title: None,
        description: "Run Python code once with the given arguments in the same sandbox, without saving anything.",
        scope: Scope::Write,
        hints: Hints::closed(true, false, false),
    };
}

/// The `omniforge_test_tool` built-in.
struct TestToolCall {
    tools: Arc<ToolAuthoring>,
}

impl ToolCall for TestToolCall {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        running(async move {
            let args: TestTool = parse_arguments(call.arguments)?;
            self.tools.test(args, call.cx).await
        })
    }
}

/// `omniforge_check_tool`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckTool {
    name: String,
    #[schemars(range(min = 1))]
    version: Option<u32>,
}

impl CheckTool {
    /// Run the examples of `version` of tool `name` (its current one if `None`).
    pub(crate) fn new(name: &str, version: Option<u32>) -> CheckTool {
        CheckTool {
            name: name.to_owned(),
            version,
        }
    }
}

impl Operation for CheckTool {
    type Service = ToolAuthoring;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_check_tool",
        title: None,
        description: "Run a stored tool version's examples again (the current version unless version is given), e.g. after an environment rebuild, and record the results. An error result lists each failing example with expected and actual.",
        scope: Scope::Write,
        hints: Hints::WRITE,
    };

    async fn apply(
        self,
        tools: &ToolAuthoring,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        tools.check(self, actor.cx).await
    }
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

    /// Creates a tool (`create`) or adds a version from `draft`: refused (the examples
    /// failed), kept as a draft, pending approval, or live.
    ///
    /// # Errors
    /// A text naming the field at fault, or the store failed.
    async fn create_or_update(
        &self,
        draft: Draft,
        cx: &RequestCx<'_>,
        create: bool,
    ) -> Result<Outcome, AuthoringError> {
        let keep_failed = draft.keep_failed_drafts.unwrap_or(self.keep_failed_drafts);
        self.check_name(&draft.name)?;
        // A tool whose versions are all drafts (or pending) exists without a current version.
        let tool = self
            .store
            .tool(&draft.name)
            .await
            .map_err(AuthoringError::from)?;
        let exists = tool.is_some();
        // Disabled (omniforge_delete_tool without purge): its versions are kept, and a new one
        // does not enable it.
        let disabled = tool.as_ref().filter(|t| !t.enabled);
        match (create, exists) {
            (true, true) => {
                return Err(AuthoringError::invalid(
                    "name",
                    match disabled {
                        Some(t) => format!(
                            "a tool named {:?} already exists and is disabled (its versions are \
                             kept); {} or use omniforge_update_tool to add a version",
                            draft.name,
                            enable_hint(&draft.name, t.current_version)
                        ),
                        None => format!(
                            "a tool named {:?} already exists; use omniforge_update_tool to add a version",
                            draft.name
                        ),
                    },
                ));
            }
            (false, false) => {
                return Err(AuthoringError::invalid(
                    "name",
                    format!("no tool named {:?}; use omniforge_create_tool", draft.name),
                ));
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
                return Ok(Outcome::refused(format!(
                    "Refused: {} of the tool's examples failed ({}); nothing was stored and the \
                     current version is unchanged. Fix the code or the examples and try again \
                     (keepFailedDrafts: true, or --keep-failed-drafts on the command line, keeps a \
                     failing version as a draft).\n\n{}",
                    failed,
                    report.summary(),
                    report.failures()
                )));
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
            return Ok(Outcome::done(approval::submitted_sentence(
                &version,
                &checked,
                &pending_secrets,
            )));
        }
        if !live {
            return Ok(Outcome::refused(format!(
                "Kept as draft version {} of tool {name}: {}; it is not current and is not \
                 served (the current version, if any, is unchanged).\n\n{}",
                version.number,
                report.summary(),
                report.failures()
            )));
        }
        let verb = if create { "Created" } else { "Updated" };
        let mut sentence = if disabled.is_some() {
            format!(
                "{verb} tool {name} (version {}, now its current version).{checked} The tool is \
                 disabled: it is not listed in tools/list and calls are refused until it is \
                 enabled; {}.",
                version.number,
                enable_hint(&name, Some(version.number))
            )
        } else {
            format!(
                "{verb} tool {name} (version {}).{checked} It is listed in tools/list now; clients \
                 that ignore notifications/tools/list_changed can call it with omniforge_call_tool.",
                version.number
            )
        };
        if !pending_secrets.is_empty() {
            sentence.push_str(&format!(
                " Secrets {} are requested, not granted: this version runs without them until \
                 an admin grants them to it (omniforge_grant_secret).",
                pending_secrets.join(", ")
            ));
        }
        Ok(Outcome::done(sentence))
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

    /// Disables tool `name`, keeping its versions, or with `purge` removes it and its
    /// history.
    ///
    /// # Errors
    /// No such tool, or the store failed.
    async fn delete(
        &self,
        name: &str,
        purge: bool,
        cx: &RequestCx<'_>,
    ) -> Result<Outcome, AuthoringError> {
        if purge {
            self.store.purge(&cx.actor(), name).await
        } else {
            self.store.set_enabled(&cx.actor(), name, false).await
        }?;
        self.source.reload(name).await?;
        Ok(Outcome::done(if purge {
            format!("Purged tool {name} and its history.")
        } else {
            format!(
                "Disabled tool {name}; its versions are kept (omniforge_get_tool shows them, \
                 omniforge_rollback_tool enables it again)."
            )
        }))
    }

    /// Makes a live version current (and enables the tool), after running its examples unless
    /// `force`; refused with the failures when one fails.
    ///
    /// # Errors
    /// The arguments are wrong, or the store refused or failed.
    async fn rollback(
        &self,
        args: RollbackTool,
        cx: &RequestCx<'_>,
    ) -> Result<Outcome, AuthoringError> {
        let target = self.store.version(&args.name, args.version).await?;
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
                return Ok(Outcome::refused(format!(
                    "Rollback refused: version {} of tool {} fails its examples ({}); the current \
                     version is unchanged. force: true rolls back without running them.\n\n{}",
                    args.version,
                    args.name,
                    report.summary(),
                    report.failures()
                )));
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
        Ok(Outcome::done(format!(
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
    async fn check(&self, args: CheckTool, cx: &RequestCx<'_>) -> Result<Outcome, AuthoringError> {
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
            return Ok(Outcome::done(format!(
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
            Outcome::refused(body)
        } else {
            Outcome::done(body)
        })
    }

    async fn get(&self, name: &str, cx: &RequestCx<'_>) -> Result<Outcome, AuthoringError> {
        let Some(stored) = self.store.get(name).await? else {
            return Err(AuthoringError::invalid(
                "name",
                format!("no tool named {name:?}"),
            ));
        };
        let mut versions = self.store.versions(name).await?;
        // A pending version is shown to its author and admins only (issue 17).
        if !cx.allows(Scope::Admin) {
            versions.retain(|v| {
                v.state.status != VersionStatus::Pending || v.spec.author == cx.author()
            });
        }
        let calls = self.store.recent_calls(name, RECENT_CALLS).await?;
        let mut view = super::describe::describe_tool(&stored, &versions);
        view["recentCalls"] = calls.iter().map(super::describe::call_json).collect();
        let text = serde_json::to_string_pretty(&view).unwrap_or_default();
        Ok(Outcome::done(text).with_data(view))
    }

    /// Runs `args.code` once in the sandbox, storing nothing: the run's result as a client
    /// gets a tool's.
    async fn test(&self, args: TestTool, cx: &RequestCx<'_>) -> CallResult {
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

/// The tool built-ins, in catalog order.
pub(crate) fn entries(tools: &Arc<ToolAuthoring>) -> Vec<Entry> {
    let test = Arc::new(TestToolCall {
        tools: tools.clone(),
    });
    vec![
        entry::<CreateTool>(tools),
        entry::<UpdateTool>(tools),
        entry::<DeleteTool>(tools),
        entry::<GetTool>(tools),
        entry::<RollbackTool>(tools),
        builtin::<TestTool>(&TestTool::TOOL, test),
        entry::<CheckTool>(tools),
    ]
}

/// How to enable disabled tool `name` again: a rollback to `version` (its current one, if it
/// has one), or the command line.
fn enable_hint(name: &str, version: Option<u32>) -> String {
    match version {
        Some(n) => format!(
            "enable it with omniforge_rollback_tool {{\"name\": {name:?}, \"version\": {n}}} \
             (or `omniforge tool enable {name}`)"
        ),
        None => format!("enable it with `omniforge tool enable {name}`"),
    }
}
